"""Executing code through the official SDK: state, output streams, errors, counts."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from e2b_code_interpreter import OutputMessage, Sandbox


def test_state_is_kept_between_executions(sandbox: Sandbox) -> None:
    """A variable, an import and a function defined in one cell are usable in the next."""
    sandbox.run_code("import math\nx = 20\ndef double(v):\n    return v * 2")
    execution = sandbox.run_code("double(x) + int(math.sqrt(4))")
    assert execution.error is None
    assert execution.text == "42"


def test_main_result_text_and_execution_count(sandbox: Sandbox) -> None:
    """The last expression is the main result (quotes stripped); counts go up by one."""
    first = sandbox.run_code("'hello'")
    second = sandbox.run_code("1 + 1")
    assert first.text == "hello"
    assert [r.is_main_result for r in first.results] == [True]
    assert first.execution_count is not None
    assert second.execution_count == first.execution_count + 1


def test_display_calls_are_not_main_results(sandbox: Sandbox) -> None:
    """display() gives results with is_main_result false, before the cell's own value."""
    execution = sandbox.run_code("from IPython.display import display\ndisplay(7)\n8")
    assert [(r.text, r.is_main_result) for r in execution.results] == [("7", False), ("8", True)]


def test_stdout_and_stderr_keep_their_order(sandbox: Sandbox) -> None:
    """Interleaved prints reach the callbacks in the order the code made them."""
    seen: list[tuple[str, str]] = []
    code = (
        "import sys\n"
        "for i in range(3):\n"
        "    print(f'out{i}', flush=True)\n"
        "    print(f'err{i}', file=sys.stderr, flush=True)\n"
    )
    execution = sandbox.run_code(
        code,
        on_stdout=lambda m: seen.append(("out", m.line)),
        on_stderr=lambda m: seen.append(("err", m.line)),
    )
    assert seen == [
        ("out", "out0\n"), ("err", "err0\n"),
        ("out", "out1\n"), ("err", "err1\n"),
        ("out", "out2\n"), ("err", "err2\n"),
    ]  # fmt: skip
    assert execution.logs.stdout == ["out0\n", "out1\n", "out2\n"]
    assert execution.logs.stderr == ["err0\n", "err1\n", "err2\n"]
    assert all(isinstance(m, str) for m in execution.logs.stdout)


def test_error_has_name_value_and_traceback(sandbox: Sandbox) -> None:
    """An exception ends the cell with its name, message and full traceback."""
    errors = []
    execution = sandbox.run_code(
        "def inner():\n    raise ValueError('bad value 17')\ninner()", on_error=errors.append
    )
    assert execution.error is not None
    assert execution.error.name == "ValueError"
    assert execution.error.value == "bad value 17"
    assert "inner()" in execution.error.traceback
    assert "bad value 17" in execution.error.traceback
    assert errors == [execution.error]
    assert sandbox.run_code("1").text == "1"  # the context still works afterwards


def test_a_failed_bash_cell_names_its_error(sandbox: Sandbox) -> None:
    """bash's kernel names no error, only the exit status: the error still has a name
    (a caller branching on it is not handed an empty string) and the status as value."""
    execution = sandbox.run_code("ls /no/such/dir", language="bash")
    assert execution.error is not None
    assert execution.error.name == "Error"
    assert execution.error.value == "2"


def test_output_before_an_error_is_kept(sandbox: Sandbox) -> None:
    """What a cell printed before it raised still arrives, with the error after it."""
    execution = sandbox.run_code("print('before')\n1/0")
    assert execution.logs.stdout == ["before\n"]
    assert execution.error is not None and execution.error.name == "ZeroDivisionError"


def test_long_running_cell_streams_output_before_it_ends(sandbox: Sandbox, tmp_path: Path) -> None:
    """Output reaches the client while the cell still runs: the cell only finishes after
    the test, reacting to that output, writes to a FIFO the cell is blocked on."""
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    early: list[str] = []

    def on_stdout(message: OutputMessage) -> None:
        early.append(message.line)
        if message.line == "started\n":
            # Opening the FIFO for writing unblocks the cell's read: done in a thread so
            # the SDK keeps reading the stream meanwhile.
            threading.Thread(target=fifo.write_text, args=("go",), daemon=True).start()

    code = f"print('started', flush=True)\nopen({str(fifo)!r}).read()\nprint('finished')"
    execution = sandbox.run_code(code, on_stdout=on_stdout, timeout=60)
    assert execution.error is None
    assert early == ["started\n", "finished\n"]


def test_cwd_of_default_context(sandbox: Sandbox, home: Path) -> None:
    """The default Python context runs in the server's default cwd."""
    assert sandbox.run_code("import os; os.getcwd()").text == str(home)
