"""Bac's SDK and CLI code interpreter against a real server and a real code-interpreter sandbox.

One sandbox per module (creating one takes seconds); tests that need fresh state make
their own context. Skipped when the template is not built, like the compat tests.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from sdk_server import BAC, BacServer

import bac
from bac import AsyncSandbox, OutputMessage, Result, Sandbox

TEMPLATES_DIR = os.environ.get("BAC_TEMPLATES_DIR", "/var/lib/bac")


def _template_built() -> bool:
    from bac_server.templates import TemplateStore

    try:
        asyncio.run(TemplateStore(Path(TEMPLATES_DIR)).get("code-interpreter-v1"))
    except Exception:
        return False
    return True


pytestmark = [
    pytest.mark.root, pytest.mark.slow,
    pytest.mark.skipif(not _template_built(), reason="code-interpreter template not built"),
]


@pytest.fixture(scope="module")
def ci_sandbox(bac_server: BacServer) -> Iterator[Sandbox]:
    """A code-interpreter sandbox shared by the module (sync SDK), killed at the end."""
    with Sandbox.create("code-interpreter-v1", timeout=300, **bac_server.opts()) as sandbox:
        yield sandbox


@pytest_asyncio.fixture  # on the session loop, like the tests
async def box(ci_sandbox: Sandbox, bac_server: BacServer) -> AsyncIterator[AsyncSandbox]:
    """The module's sandbox, connected with the async SDK."""
    sandbox = await AsyncSandbox.connect(ci_sandbox.sandbox_id, **bac_server.opts())
    yield sandbox
    await sandbox.aclose()


def test_state_is_kept_sync(ci_sandbox: Sandbox) -> None:
    """Through the sync twin, a variable set by one cell is read by the next."""
    assert ci_sandbox.run_code("kept = 41").error is None
    execution = ci_sandbox.run_code("kept + 1")
    assert execution.text == "42"
    assert execution.execution_count is not None and execution.execution_count >= 2


async def test_error_has_name_value_traceback(box: AsyncSandbox) -> None:
    """A raised exception is execution.error (not raised) and reaches on_error."""
    seen: list[bac.ExecutionError] = []
    execution = await box.run_code("def f():\n    1 / 0\nf()", on_error=seen.append)
    assert execution.error is not None
    assert execution.error.name == "ZeroDivisionError"
    assert "division by zero" in execution.error.value
    assert "f()" in execution.error.traceback
    assert seen == [execution.error]


async def test_callbacks_fire_while_the_cell_runs(box: AsyncSandbox) -> None:
    """The cell blocks until on_stdout for 'one' has written a file: only streaming ends it."""
    flag = f"/tmp/go-{os.getpid()}-{id(box)}"
    order: list[str] = []

    async def on_stdout(message: OutputMessage) -> None:
        order.append(f"out:{message.line.strip()}")
        if message.line == "one\n":
            await box.files.write(flag, "go")

    def on_result(result: Result) -> None:
        order.append(f"result:{result.text}")

    code = (
        "import os, time\nprint('one', flush=True)\n"
        "deadline = time.monotonic() + 30\n"
        f"while not os.path.exists({flag!r}) and time.monotonic() < deadline:\n"
        "    time.sleep(0.01)\n"
        f"print('two' if os.path.exists({flag!r}) else 'no flag', flush=True)\n'done'"
    )
    execution = await box.run_code(code, on_stdout=on_stdout, on_result=on_result)
    assert order == ["out:one", "out:two", "result:done"]
    assert execution.logs.stdout == ["one\n", "two\n"]


async def test_context_cwd_isolation_and_removal(box: AsyncSandbox) -> None:
    """A context runs in its cwd with its own state, is listed, and is gone once removed."""
    await box.commands.run("mkdir -p /home/user/work")
    context = await box.create_code_context(cwd="/home/user/work")
    assert (context.language, context.cwd) == ("python", "/home/user/work")
    assert (await box.run_code("import os; os.getcwd()", context=context)).text == \
        "/home/user/work"
    await box.run_code("only_default = 1")
    assert (await box.run_code("'only_default' in globals()", context=context)).text == "False"
    assert context.id in [c.id for c in await box.list_code_contexts()]
    await box.remove_code_context(context)
    with pytest.raises(bac.NotFoundError):
        await box.run_code("1", context=context.id)
    with pytest.raises(bac.NotFoundError):
        await box.restart_code_context(context)


async def test_restart_loses_state(box: AsyncSandbox) -> None:
    """After restart_code_context, a variable defined before is a NameError."""
    context = await box.create_code_context()
    await box.run_code("z = 5", context=context)
    await box.restart_code_context(context)
    execution = await box.run_code("z", context=context)
    assert execution.error is not None and execution.error.name == "NameError"


async def test_bad_arguments_and_timeout(box: AsyncSandbox) -> None:
    """Unknown language is InvalidArgumentError; a cell past timeout is TimeoutError, then
    the context still works."""
    with pytest.raises(bac.InvalidArgumentError, match="cobol"):
        await box.run_code("1", language="cobol")
    with pytest.raises(bac.TimeoutError):
        await box.run_code("import time; time.sleep(60)", timeout=1)
    assert (await box.run_code("6 * 7")).text == "42"


async def test_base_sandbox_has_no_kernel_server(bac_server: BacServer) -> None:
    """run_code on a base sandbox says nothing listens on 49999 instead of hanging."""
    async with await AsyncSandbox.create(timeout=60, **bac_server.opts()) as plain:
        with pytest.raises(bac.SandboxUnreachableError, match="49999"):
            await plain.run_code("1")


def _cli(
    bac_server: BacServer, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*BAC, "--api-url", bac_server.url, "--api-key", bac_server.api_key, "run-code", *args],
        input=stdin, capture_output=True, text=True, timeout=120, check=False,
    )


def test_cli_saves_chart_and_prints_text(
    ci_sandbox: Sandbox, bac_server: BacServer, tmp_path: Path
) -> None:
    """`bac run-code SBX - --save-images DIR`: stdout streamed, PNG written, value printed."""
    code = (
        "import matplotlib.pyplot as plt\nprint('plotting')\n"
        "plt.plot([1, 2, 3], [1, 4, 9]); plt.show()\n'ok'"
    )
    done = _cli(bac_server, ci_sandbox.sandbox_id, "-", "--save-images", str(tmp_path),
                stdin=code)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "plotting" and lines[-1] == "ok"
    pngs = [Path(line) for line in lines if line.endswith(".png")]
    assert len(pngs) == 1 and pngs[0].parent == tmp_path
    assert pngs[0].read_bytes().startswith(b"\x89PNG")


def test_cli_raised_cell_exits_1_with_traceback(
    ci_sandbox: Sandbox, bac_server: BacServer
) -> None:
    """A cell that raises prints its traceback (no ANSI when piped) and exits 1."""
    done = _cli(bac_server, ci_sandbox.sandbox_id, "raise KeyError('nope')")
    assert done.returncode == 1
    assert "KeyError" in done.stderr and "nope" in done.stderr
    assert "\x1b[" not in done.stderr


def test_cli_unknown_context_is_one_line_exit_4(
    ci_sandbox: Sandbox, bac_server: BacServer
) -> None:
    """A missing context is one `error:` line and the not-found exit code."""
    done = _cli(bac_server, ci_sandbox.sandbox_id, "1", "--context", "no-such-context")
    assert done.returncode == 4
    assert done.stderr.strip().startswith("error:") and len(done.stderr.strip().splitlines()) == 1
