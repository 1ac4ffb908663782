"""Every way of showing an image in Python returns it as a result, as in E2B's interpreter."""

from __future__ import annotations

import base64

import pytest
from e2b_code_interpreter import AsyncSandbox, Sandbox
from kernel_harness import Daemon

PNG = b"\x89PNG\r\n\x1a\n"
JPEG = b"\xff\xd8\xff"
_RED = "from PIL import Image\nimg = Image.new('RGB', (4, 3), 'red')\n"


def _only_result(sandbox: Sandbox, code: str):  # type: ignore[no-untyped-def]
    execution = sandbox.run_code(code)
    assert execution.error is None, execution.error
    (result,) = execution.results
    return result


def test_pil_show_displays_the_image(sandbox: Sandbox) -> None:
    """`Image.show()` (no viewer program in a sandbox) sends the image as a PNG result."""
    result = _only_result(sandbox, _RED + "img.show()")
    assert base64.b64decode(result.png).startswith(PNG)
    assert not result.is_main_result


def test_pil_display_and_last_expression(sandbox: Sandbox) -> None:
    """`display(img)` is a display result; an image as the last expression the main one."""
    displayed = _only_result(sandbox, _RED + "display(img)")
    assert base64.b64decode(displayed.png).startswith(PNG)
    assert not displayed.is_main_result
    main = _only_result(sandbox, _RED + "img")
    assert base64.b64decode(main.png).startswith(PNG) and main.is_main_result


@pytest.mark.parametrize(
    ("code", "key", "magic"),
    [
        (
            "import io\nbuf = io.BytesIO(); img.save(buf, 'PNG')\n"
            "display(Image(data=buf.getvalue(), format='png'))",
            "png",
            PNG,
        ),
        (
            "import io\nbuf = io.BytesIO(); img.save(buf, 'JPEG')\n"
            "display(Image(data=buf.getvalue(), format='jpeg'))",
            "jpeg",
            JPEG,
        ),
    ],
)
def test_ipython_display_of_png_and_jpeg(
    sandbox: Sandbox, code: str, key: str, magic: bytes
) -> None:
    """IPython's `Image` in PNG or JPEG arrives under its own key, base64-encoded."""
    setup = _RED.replace("from PIL import Image", "from PIL import Image as PILImage")
    setup = setup.replace("Image.new", "PILImage.new") + "from IPython.display import Image\n"
    result = _only_result(sandbox, setup + code)
    assert base64.b64decode(getattr(result, key)).startswith(magic)


def test_ipython_display_of_svg(sandbox: Sandbox) -> None:
    """An SVG shown with IPython's `SVG` is the `svg` of a result."""
    svg = (
        "<svg xmlns='http://www.w3.org/2000/svg' width='4' height='4'>"
        "<rect width='4' height='4'/></svg>"
    )
    result = _only_result(sandbox, f"from IPython.display import SVG\ndisplay(SVG({svg!r}))")
    assert result.svg is not None and "<rect" in result.svg


def test_figure_saved_then_shown(sandbox: Sandbox, tmp_path: object) -> None:
    """A matplotlib figure saved to a file and then shown still comes back as a PNG."""
    code = (
        "import matplotlib.pyplot as plt\n"
        "plt.plot([1, 2], [3, 4])\n"
        f"plt.savefig({str(tmp_path)!r} + '/fig.png')\n"
        "plt.show()"
    )
    result = _only_result(sandbox, code)
    assert base64.b64decode(result.png).startswith(PNG)
    assert result.chart is not None and result.chart.type.value == "line"


def test_several_displays_arrive_in_order(sandbox: Sandbox) -> None:
    """Each display() call is its own result, in the order made, before the main result."""
    execution = sandbox.run_code("display('one')\ndisplay('two')\n'three'")
    assert [(r.text, r.is_main_result) for r in execution.results] == [
        ("one", False), ("two", False), ("three", True),
    ]  # fmt: skip


async def test_async_sdk_gets_a_shown_image(kernel_server: Daemon) -> None:
    """The async SDK receives the image `Image.show()` displayed."""
    sandbox = await AsyncSandbox.create(debug=True, sandbox_url=kernel_server.url)
    execution = await sandbox.run_code(_RED + "img.show()")
    assert execution.error is None, execution.error
    (result,) = execution.results
    assert base64.b64decode(result.png).startswith(PNG)
