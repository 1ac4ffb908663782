"""The server's own life: ready on its pipe, and no kernel outlives it."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
from e2b_code_interpreter import Sandbox
from kernel_harness import is_running, process_group_members, running_kernel_server


def test_stopping_the_server_stops_every_kernel(tmp_path: Path) -> None:
    """SIGTERM to the server ends every kernel and what it started, even a nohup child of
    bash_kernel's shell, which lives in another session."""
    with running_kernel_server(tmp_path, tmp_path / "server.log", prestart="") as server:
        assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200
        sandbox = Sandbox.create(debug=True, sandbox_url=server.url)
        python_pid = int(sandbox.run_code("import os; os.getpid()").text or 0)
        spawn = 'nohup sleep 600 >/dev/null 2>&1 &\necho "pids $$ $!"'
        bash = sandbox.run_code(spawn, language="bash")
        (line,) = [x for x in "".join(bash.logs.stdout).splitlines() if x.startswith("pids")]
        shell_pid, child_pid = map(int, line.split()[1:])
        assert os.getpgid(python_pid) == python_pid  # each kernel leads its own group
        groups = {python_pid, os.getpgid(shell_pid)}
        assert all(process_group_members(g) for g in groups)
        process = server.proc
    # uvicorn re-raises the signal it handled once its graceful shutdown is done.
    assert process.returncode in (0, -signal.SIGTERM)
    for pid in (python_pid, shell_pid, child_pid):
        assert not is_running(pid), pid
    assert not any(process_group_members(g) for g in groups)


def test_first_execution_waits_for_a_kernel_started_on_demand(tmp_path: Path) -> None:
    """With no kernel started ahead, the first execution starts one and still succeeds."""
    with running_kernel_server(tmp_path, tmp_path / "server.log", prestart="") as server:
        # The default contexts are listed from the start; their kernels are not running.
        listed = httpx.get(f"{server.url}/contexts", timeout=10).json()
        assert "python" in [c["language"] for c in listed]
        sandbox = Sandbox.create(debug=True, sandbox_url=server.url)
        assert sandbox.run_code("3 * 3").text == "9"
        assert [c.id for c in sandbox.list_code_contexts()] == [c["id"] for c in listed]
