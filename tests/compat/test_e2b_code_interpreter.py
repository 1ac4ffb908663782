"""The official e2b-code-interpreter SDK (2.11.5) against a running Bac server.

Every test creates a real ``code-interpreter-v1`` sandbox through the SDK: the kernel
server inside it was started by envd's supervisor, and code runs in a real ipykernel.
Skipped when the template is not built (``python -m bac_server.prepare`` builds it).
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Iterator

import pytest
from bac_process import TEMPLATES_DIR

CI_VERSION = "2.11.5"


def _template_built() -> bool:
    from pathlib import Path

    from bac_server.templates import TemplateStore

    try:
        asyncio.run(TemplateStore(Path(TEMPLATES_DIR)).get("code-interpreter-v1"))
    except Exception:
        return False
    return True


pytestmark = pytest.mark.skipif(not _template_built(),
                                reason="code-interpreter template not built")


@pytest.fixture
def ci() -> Iterator[object]:
    from importlib.metadata import version

    from e2b_code_interpreter import Sandbox

    assert version("e2b-code-interpreter") == CI_VERSION, "these tests pin the SDK version"
    sandbox = Sandbox.create(timeout=180, envs={"SANDBOX_WIDE": "from-create"})
    yield sandbox
    sandbox.kill()


def test_state_is_kept_between_executions(ci: object) -> None:
    """A variable defined by one run_code is visible to the next (same default context)."""
    first = ci.run_code("x = 41")  # type: ignore[attr-defined]
    assert first.error is None
    second = ci.run_code("x + 1")  # type: ignore[attr-defined]
    assert second.text == "42"
    assert second.execution_count is not None and second.execution_count >= 2


def test_matplotlib_chart_comes_back_as_png_and_chart(ci: object) -> None:
    """A matplotlib figure is a result with a decodable PNG and structured line chart data."""
    execution = ci.run_code(  # type: ignore[attr-defined]
        "import matplotlib.pyplot as plt\n"
        "plt.plot([1, 2, 3], [1, 4, 9], label='squares')\n"
        "plt.title('Squares'); plt.xlabel('n'); plt.ylabel('n^2')\n"
        "plt.show()\n")
    assert execution.error is None, execution.error
    charts = [r for r in execution.results if r.png]
    assert len(charts) == 1
    assert base64.b64decode(charts[0].png).startswith(b"\x89PNG")
    chart = charts[0].chart
    assert chart is not None and chart.type.value == "line"
    assert chart.title == "Squares"
    assert [list(p) for p in chart.elements[0].points] == [[1, 1], [2, 4], [3, 9]]


def test_dataframe_is_a_data_result(ci: object) -> None:
    """A pandas DataFrame as the last expression comes back as `data` (columns -> values)."""
    execution = ci.run_code(  # type: ignore[attr-defined]
        "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})")
    assert execution.error is None, execution.error
    main = [r for r in execution.results if r.is_main_result]
    assert main and main[0].data == {"a": [1, 2], "b": ["x", "y"]}
    assert main[0].html and "<table" in main[0].html


def test_error_has_name_value_and_traceback(ci: object) -> None:
    """An exception is an ExecutionError with its name, message and full traceback."""
    errors: list[object] = []
    execution = ci.run_code("def f():\n    1 / 0\nf()",  # type: ignore[attr-defined]
                            on_error=errors.append)
    assert execution.error is not None
    assert execution.error.name == "ZeroDivisionError"
    assert "division by zero" in execution.error.value
    assert "f()" in execution.error.traceback
    assert errors and errors[0].name == "ZeroDivisionError"  # type: ignore[attr-defined]


def test_stdout_streams_before_the_cell_ends(ci: object) -> None:
    """Printed lines reach on_stdout while the cell is still running, in order."""
    seen: list[tuple[str, float]] = []
    started = time.monotonic()
    execution = ci.run_code(  # type: ignore[attr-defined]
        "import time\nprint('one', flush=True)\ntime.sleep(1.5)\nprint('two', flush=True)",
        on_stdout=lambda msg: seen.append((msg.line, time.monotonic() - started)))
    ended = time.monotonic() - started
    assert [text for text, _ in seen] == ["one\n", "two\n"]
    assert seen[0][1] < ended - 1.0  # "one" arrived well before the end
    assert execution.logs.stdout == ["one\n", "two\n"]


def test_context_with_cwd(ci: object) -> None:
    """A context created with a cwd runs its code there, and its state is its own."""
    ci.commands.run("mkdir -p /home/user/work")  # type: ignore[attr-defined]
    context = ci.create_code_context(cwd="/home/user/work")  # type: ignore[attr-defined]
    assert context.cwd == "/home/user/work"
    execution = ci.run_code("import os; os.getcwd()", context=context)  # type: ignore[attr-defined]
    assert execution.text == "/home/user/work"
    ci.run_code("y = 1")  # type: ignore[attr-defined]  # default context
    other = ci.run_code("'y' in globals()", context=context)  # type: ignore[attr-defined]
    assert other.text == "False"
    ids = [c.id for c in ci.list_code_contexts()]  # type: ignore[attr-defined]
    assert context.id in ids


def test_env_vars_sandbox_wide_and_per_execution(ci: object) -> None:
    """Create-time envs reach the kernel; per-execution envs apply to that run only."""
    wide = ci.run_code("import os; os.environ.get('SANDBOX_WIDE')")  # type: ignore[attr-defined]
    assert wide.text == "from-create"
    scoped = ci.run_code("os.environ.get('ONE_RUN')",  # type: ignore[attr-defined]
                         envs={"ONE_RUN": "yes"})
    assert scoped.text == "yes"
    after = ci.run_code("str(os.environ.get('ONE_RUN'))")  # type: ignore[attr-defined]
    assert after.text == "None"


def test_restart_code_context_loses_state(ci: object) -> None:
    """After restart_code_context, variables defined before are gone."""
    context = ci.create_code_context()  # type: ignore[attr-defined]
    ci.run_code("z = 5", context=context)  # type: ignore[attr-defined]
    ci.restart_code_context(context)  # type: ignore[attr-defined]
    execution = ci.run_code("z", context=context)  # type: ignore[attr-defined]
    assert execution.error is not None and execution.error.name == "NameError"


def test_kernel_server_is_restarted_after_it_is_killed(ci: object) -> None:
    """Killing the kernel server inside the sandbox: the supervisor starts a new one."""
    ci.run_code("x = 1")  # type: ignore[attr-defined]
    # '[b]' keeps the pattern from matching the shell that runs pgrep/pkill itself.
    find = "pgrep -f '[b]ac_kernel --port' || true"
    old = ci.commands.run(find).stdout.split()  # type: ignore[attr-defined]
    assert len(old) == 1
    # The kernel server runs as root, as E2B's does: only root may signal it.
    ci.commands.run("pkill -f '[b]ac_kernel --port'", user="root")  # type: ignore[attr-defined]
    deadline = time.monotonic() + 30
    # Nothing inside the sandbox announces the restart: poll with a deadline.
    while True:
        now = ci.commands.run(find).stdout.split()  # type: ignore[attr-defined]
        if now and now != old:
            try:
                execution = ci.run_code("1 + 1", timeout=20)  # type: ignore[attr-defined]
                if execution.text == "2":
                    break
            except Exception:
                if time.monotonic() > deadline:
                    raise
        assert time.monotonic() < deadline, f"no new kernel server (pids {now})"
        time.sleep(0.2)
    fresh = ci.run_code("'x' in globals()")  # type: ignore[attr-defined]
    assert fresh.text == "False"  # a new kernel server, so a new kernel


def test_defaults_listed_and_kernels_run_as_root(ci: object) -> None:
    """Before any code ran, the Python and JavaScript default contexts are listed; kernels
    run as root (as in E2B's template), so `/root` works as a context's cwd."""
    listed = {c.language for c in ci.list_code_contexts()}  # type: ignore[attr-defined]
    assert {"python", "javascript"} <= listed
    context = ci.create_code_context(cwd="/root")  # type: ignore[attr-defined]
    execution = ci.run_code(  # type: ignore[attr-defined]
        "import os, getpass; (getpass.getuser(), os.getcwd())", context=context)
    assert execution.text == "('root', '/root')"


@pytest.mark.parametrize(("language", "code", "text"), [
    ("js", "const a = await Promise.resolve(40); a + 2", "42"),
    ("ts", "const n: number = 6; n * 7", "42"),
    ("r", "x <- 41\nx + 1", "[1] 42"),
    ("java", "int x = 41;\nx + 1", "42"),
])
def test_every_language_returns_its_last_value(
    ci: object, language: str, code: str, text: str
) -> None:
    """JavaScript, TypeScript, R and Java cells' last value is `execution.text`."""
    execution = ci.run_code(code, language=language)  # type: ignore[attr-defined]
    assert execution.error is None, execution.error
    assert execution.text == text


def test_async_sdk_js_error_and_image() -> None:
    """The async SDK: a thrown JS error is named, and PIL's show() returns the image."""
    from e2b_code_interpreter import AsyncSandbox

    async def scenario() -> None:
        sandbox = await AsyncSandbox.create(timeout=120)
        try:
            failed = await sandbox.run_code("throw new RangeError('far')", language="js")
            assert failed.error is not None
            assert (failed.error.name, failed.error.value) == ("RangeError", "far")
            shown = await sandbox.run_code(
                "from PIL import Image\nImage.new('RGB', (2, 2), 'red').show()")
            assert shown.error is None, shown.error
            assert base64.b64decode(shown.results[0].png).startswith(b"\x89PNG")
        finally:
            await sandbox.kill()

    asyncio.run(scenario())


def test_timeout_interrupts_the_cell_through_the_gateway(ci: object) -> None:
    """`run_code(timeout=N)` through Bac's gateway: the SDK gives up after 2N (its
    transport adds the read and write timeouts), and the kernel is interrupted as soon as
    it does, keeping its state (docs/code-interpreter.md, *Contexts and kernels*)."""
    from e2b import TimeoutException

    ci.run_code("import time\ninterrupted_at = None")  # type: ignore[attr-defined]
    code = "try:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    interrupted_at = time.time()"
    started = time.time()
    with pytest.raises(TimeoutException):
        ci.run_code(code, timeout=1)  # type: ignore[attr-defined]
    gave_up = time.time()
    assert 1 <= gave_up - started < 4
    execution = ci.run_code("interrupted_at", timeout=60)  # type: ignore[attr-defined]
    assert execution.error is None, execution.error
    assert execution.text is not None
    # The sandbox's clock is the host's (same kernel): comparable with ours.
    assert 0 <= float(execution.text) - gave_up < 0.5
