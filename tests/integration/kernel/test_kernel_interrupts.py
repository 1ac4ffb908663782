"""Client timeouts interrupt the kernel; dead kernels come back; cells are serialized."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import httpx
import pytest
from e2b import TimeoutException
from e2b_code_interpreter import Execution, OutputMessage, Sandbox
from kernel_harness import Daemon


def _blocked_cell(fifo: Path, before: str = "running") -> str:
    """Code that prints `before`, then blocks until someone writes to `fifo`."""
    return f"print({before!r}, flush=True)\nopen({str(fifo)!r}).read()\nprint('after')"


def _release(fifo: Path) -> None:
    threading.Thread(target=fifo.write_text, args=("go",), daemon=True).start()


def test_client_timeout_interrupts_and_state_survives(sandbox: Sandbox) -> None:
    """After an SDK timeout the next cell runs at once, in the same (interrupted) kernel."""
    context = sandbox.create_code_context()
    sandbox.run_code("survivor = 7", context=context)
    with pytest.raises(TimeoutException):
        sandbox.run_code("import time\ntime.sleep(600)", context=context, timeout=2)
    execution = sandbox.run_code("survivor", context=context, timeout=60)
    assert execution.error is None, execution.error
    assert execution.text == "7"


def test_timeout_ends_when_the_client_gives_up_and_the_kernel_stops_then(
    sandbox: Sandbox,
) -> None:
    """`run_code(timeout=N)`: the server interrupts the cell the moment the client leaves.

    The SDK (2.11.5) leaves only after 2N: its transport (pyqwest's httpx adapter) makes
    one deadline of the read and write timeouts added up, and the request carries no
    trace of N, so the server cannot end it sooner. What the server owes, it does: the
    kernel is interrupted at the client's departure, and its state is kept."""
    context = sandbox.create_code_context()
    sandbox.run_code("import time\ninterrupted_at = None", context=context)
    code = "try:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    interrupted_at = time.time()"
    started = time.time()
    with pytest.raises(TimeoutException):
        sandbox.run_code(code, context=context, timeout=1)
    gave_up = time.time()
    assert 1 <= gave_up - started < 4  # 2 s (2N) with the pinned SDK
    execution = sandbox.run_code("interrupted_at", context=context, timeout=60)
    assert execution.error is None, execution.error
    assert execution.text is not None
    # `gave_up` is read after the SDK has closed its connection and raised, so the
    # interrupt (at the departure) may come a few ms before it; one before the client
    # left would come a whole N (1 s) before it.
    assert -0.05 <= float(execution.text) - gave_up < 0.5


def test_kernel_ignoring_the_interrupt_is_replaced(sandbox: Sandbox) -> None:
    """Code that swallows KeyboardInterrupt cannot block the context: it is restarted."""
    context = sandbox.create_code_context()
    stubborn = (
        "import time\n"
        "while True:\n"
        "    try:\n"
        "        time.sleep(1)\n"
        "    except KeyboardInterrupt:\n"
        "        pass"
    )
    with pytest.raises(TimeoutException):
        sandbox.run_code(stubborn, context=context, timeout=2)
    assert sandbox.run_code("40 + 2", context=context, timeout=60).text == "42"


@pytest.mark.parametrize("suicide", ["os._exit(3)", "os.kill(os.getpid(), 9)"])
def test_kernel_suicide_gives_an_error_and_a_fresh_kernel(sandbox: Sandbox, suicide: str) -> None:
    """A kernel that kills itself ends the cell with an error; the next cell works."""
    context = sandbox.create_code_context()
    sandbox.run_code("lost = 1", context=context)
    died = sandbox.run_code(
        f"import os\nprint('last words', flush=True)\n{suicide}", context=context
    )
    assert died.error is not None
    assert died.error.name == "DeadKernelError"
    after = sandbox.run_code("'lost' in globals(), 6 * 7", context=context)
    assert after.error is None, after.error
    assert after.text == "(False, 42)"


def test_restart_ends_a_running_cell(sandbox: Sandbox, tmp_path: Path) -> None:
    """Restarting a context whose cell is blocked ends that cell with an error at once."""
    fifo = tmp_path / "never"
    os.mkfifo(fifo)
    context = sandbox.create_code_context()
    running = threading.Event()
    outcome: list[Execution] = []

    def run() -> None:
        outcome.append(
            sandbox.run_code(
                _blocked_cell(fifo), context=context, on_stdout=lambda _: running.set(), timeout=120
            )
        )

    worker = threading.Thread(target=run)
    worker.start()
    assert running.wait(60)
    sandbox.restart_code_context(context)
    worker.join(60)
    assert not worker.is_alive()
    (execution,) = outcome
    assert execution.error is not None and "restarted" in execution.error.value
    assert sandbox.run_code("1", context=context).text == "1"


def test_cells_in_one_context_are_serialized(sandbox: Sandbox, tmp_path: Path) -> None:
    """A cell sent while another runs in the same context starts only after it ends."""
    fifo = tmp_path / "gate"
    os.mkfifo(fifo)
    context = sandbox.create_code_context()
    order: list[str] = []
    started = threading.Event()

    def record(message: OutputMessage) -> None:
        order.append(message.line.strip())
        if message.line == "first\n":
            started.set()

    first = threading.Thread(
        target=sandbox.run_code,
        args=(_blocked_cell(fifo, "first"),),
        kwargs={"context": context, "on_stdout": record, "timeout": 120},
    )
    first.start()
    assert started.wait(60)
    second = threading.Thread(
        target=sandbox.run_code,
        args=("print('second')",),
        kwargs={"context": context, "on_stdout": record, "timeout": 120},
    )
    second.start()
    _release(fifo)
    first.join(60)
    second.join(60)
    assert order == ["first", "after", "second"]


def test_keepalive_lines_while_a_cell_is_silent(kernel_server: Daemon, tmp_path: Path) -> None:
    """A silent cell's stream carries keepalive lines, then the cell's own lines."""
    fifo = tmp_path / "quiet"
    os.mkfifo(fifo)
    context_id = httpx.post(f"{kernel_server.url}/contexts", json={}, timeout=60).json()["id"]
    body = {"code": f"open({str(fifo)!r}).read()\n'done'", "context_id": context_id}
    types: list[str] = []
    with httpx.stream("POST", f"{kernel_server.url}/execute", json=body, timeout=60) as response:
        assert response.headers["content-type"] == "application/x-ndjson"
        for line in response.iter_lines():
            kind = httpx.Response(200, content=line).json()["type"]
            types.append(kind)
            if kind == "keepalive" and types.count("keepalive") == 1:
                _release(fifo)
    assert types[0] == "keepalive"
    assert types[-3:] == ["result", "number_of_executions", "end_of_execution"]
