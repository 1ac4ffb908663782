"""Rich results: every MIME type the SDK knows, unknown ones under `extra`, DataFrames."""

from __future__ import annotations

import base64

import pytest
from e2b_code_interpreter import Sandbox

# A 1x1 PNG and a minimal JPEG, built in the kernel with Pillow (a matplotlib dependency).
_IMAGE_BYTES = """
import io
from PIL import Image as _PIL
def _image(fmt):
    buf = io.BytesIO()
    _PIL.new("RGB", (2, 2), (255, 0, 0)).save(buf, format=fmt)
    return buf.getvalue()
"""


@pytest.mark.parametrize(
    ("code", "key", "expected"),
    [
        ("HTML('<b>bold</b>')", "html", "<b>bold</b>"),
        ("Markdown('# Title')", "markdown", "# Title"),
        ("SVG('<svg xmlns=\"http://www.w3.org/2000/svg\"><rect/></svg>')", "svg", "<rect/>"),
        ("Latex(r'$\\alpha$')", "latex", "$\\alpha$"),
        ("Javascript('console.log(1)')", "javascript", "console.log(1)"),
    ],
)
def test_text_mime_types(sandbox: Sandbox, code: str, key: str, expected: str) -> None:
    """IPython display objects come back under their SDK key."""
    execution = sandbox.run_code(f"from IPython.display import *\n{code}")
    assert execution.error is None, execution.error
    (result,) = execution.results
    assert expected in result[key]
    assert result.is_main_result


def test_json_result_is_an_object(sandbox: Sandbox) -> None:
    """application/json arrives as a parsed object, not a string."""
    execution = sandbox.run_code("from IPython.display import JSON\nJSON({'a': [1, 2]})")
    assert execution.results[0].json == {"a": [1, 2]}


@pytest.mark.parametrize(
    ("fmt", "key", "magic"), [("png", "png", b"\x89PNG"), ("jpeg", "jpeg", b"\xff\xd8")]
)
def test_images_are_base64(sandbox: Sandbox, fmt: str, key: str, magic: bytes) -> None:
    """PNG and JPEG images arrive base64-encoded and decode to the image bytes."""
    code = (
        f"{_IMAGE_BYTES}\nfrom IPython.display import Image\nImage(_image({fmt!r}), format={fmt!r})"
    )
    execution = sandbox.run_code(code)
    assert execution.error is None, execution.error
    assert base64.b64decode(execution.results[0][key]).startswith(magic)


def test_pdf_result(sandbox: Sandbox) -> None:
    """An object with a PDF representation gives a base64 `pdf`."""
    code = "class Doc:\n    def _repr_pdf_(self):\n        return b'%PDF-1.4 minimal'\nDoc()"
    execution = sandbox.run_code(code)
    assert execution.error is None, execution.error
    assert base64.b64decode(execution.results[0].pdf).startswith(b"%PDF-1.4")


def test_unknown_mime_type_goes_to_extra(sandbox: Sandbox) -> None:
    """A MIME type without an SDK key is kept under `extra`."""
    code = (
        "from IPython.display import display\n"
        "display({'text/plain': 'x', 'application/vnd.custom+json': {'k': 1}}, raw=True)"
    )
    execution = sandbox.run_code(code)
    (result,) = execution.results
    assert result.extra == {"application/vnd.custom+json": {"k": 1}}
    assert result.text == "x"
    assert not result.is_main_result


def test_dataframe_as_data(sandbox: Sandbox) -> None:
    """A DataFrame result carries its columns as `data`, plus text and html."""
    code = (
        "import pandas as pd\n"
        "pd.DataFrame({'name': ['a', 'b'], 'n': [1, 2], 'x': [0.5, None],"
        " 'when': pd.to_datetime(['2024-01-01', '2024-01-02'])})"
    )
    execution = sandbox.run_code(code)
    assert execution.error is None, execution.error
    (result,) = execution.results
    assert result.data == {
        "name": ["a", "b"],
        "n": [1, 2],
        "x": [0.5, None],
        "when": ["2024-01-01T00:00:00.000", "2024-01-02T00:00:00.000"],
    }
    assert "<table" in (result.html or "")
    assert result.text is not None and "name" in result.text
    assert set(result.formats()) >= {"text", "html", "data"}


def test_print_of_dataframe_is_plain_stdout(sandbox: Sandbox) -> None:
    """Printing a DataFrame is stdout text, not a result."""
    execution = sandbox.run_code("import pandas as pd\nprint(pd.DataFrame({'a': [1]}))")
    assert execution.results == []
    assert "a" in "".join(execution.logs.stdout)
