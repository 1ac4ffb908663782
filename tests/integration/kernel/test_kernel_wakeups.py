"""Lost wake-ups and wedged kernels: no request waits forever.

The first test orders events on a real kernel's real sockets: it holds the event loop
until a shell reply's wake-up is pending on our socket, then sends the next request. That
is the moment the first execution after an on-demand kernel start sent its request (the
start-up handshake's reply was landing), and it used to hang there for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import time
from pathlib import Path

import zmq
from e2b_code_interpreter import Sandbox
from kernel_harness import running_kernel_server

from bac_kernel._inbox import Incoming
from bac_kernel._kernel import Kernel
from bac_kernel._languages import resolve_language


async def _shell_reply(kernel: Kernel, msg_id: str) -> Incoming:
    while True:
        item = await kernel.inbox.get()
        if isinstance(item, Incoming) and item.channel == "shell" and item.parent_id == msg_id:
            return item


async def test_a_reply_landing_while_a_request_is_sent_is_still_read(tmp_path: Path) -> None:
    """A shell reply whose wake-up is pending while the next request goes out is still read
    (a send must not consume the socket's wake-up behind pyzmq's back)."""
    kernel = Kernel(resolve_language("python"), str(tmp_path))
    await kernel.start()
    try:
        kernel.collecting = True
        # Start from a quiet shell socket. The start-up's warm cell may still have its reply
        # in flight (the handshake ends on its iopub status): one round trip reads it, since
        # shell replies come in order. Then nothing may be left pending on our socket: with a
        # message unread, ZeroMQ sets no new wake-up when the next one lands, and the select
        # below would wait for one that never comes. Looking (EVENTS) reads nothing.
        quiet = kernel.execute("pass", silent=True, store_history=False, stop_on_error=False)
        await asyncio.wait_for(_shell_reply(kernel, quiet), 30)
        shadow = zmq.Socket.shadow(kernel._kc.shell_channel.socket.underlying)
        assert not shadow.get(zmq.EVENTS) & zmq.POLLIN, "a shell message is still unread"
        first = kernel.execute(
            "import time; time.sleep(0.05)", silent=True, store_history=False, stop_on_error=False
        )
        # Block the loop until the reply's wake-up is pending on our shell socket; select
        # only looks at the descriptor, it consumes nothing.
        shell_fd = kernel._kc.shell_channel.socket.FD  # observed only, never read or written
        readable, _, _ = select.select([shell_fd], [], [], 30)
        assert readable, "the kernel never answered"
        second = kernel.execute("6 * 7", silent=False, store_history=False, stop_on_error=False)
        assert (await asyncio.wait_for(_shell_reply(kernel, first), 10)).msg["content"][
            "status"
        ] == "ok"
        assert (await asyncio.wait_for(_shell_reply(kernel, second), 10)).msg["content"][
            "status"
        ] == "ok"
    finally:
        kernel.collecting = False
        await kernel.close()


def test_a_kernel_that_never_takes_a_request_is_replaced(tmp_path: Path) -> None:
    """A kernel that never starts on a request (here: stopped) ends the execution with a
    clear error once the acknowledgement timeout passes, and the next one runs on a fresh
    kernel."""
    with running_kernel_server(tmp_path, tmp_path / "server.log", ack_timeout=3) as server:
        sandbox = Sandbox.create(debug=True, sandbox_url=server.url)
        pid = int(sandbox.run_code("import os; os.getpid()").text or 0)
        os.kill(pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            execution = sandbox.run_code("1 + 1", timeout=90)
            took = time.monotonic() - started
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        assert execution.error is not None
        assert execution.error.name == "DeadKernelError"
        assert "did not take the request within 3 s" in execution.error.value
        assert took < 60, took
        assert sandbox.run_code("import os; os.getpid() != " + str(pid)).text == "True"
