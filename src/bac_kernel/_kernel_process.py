"""A kernel process's plumbing: launching it, sending to and reading its channels,
noticing its exit.

`Kernel` (in `_kernel`) owns the lifecycle; this module holds the parts that talk to
jupyter_client, pyzmq and the OS, each bound to one process generation.

Requests go out through `Requests`, never through jupyter_client's own send: that one
turns pyzmq's asyncio socket into a plain one and sends behind pyzmq's back. A ZeroMQ send
also processes the socket's pending commands, and so can consume the wake-up of a reply
arriving at that moment; pyzmq, never told, leaves its reader asleep, and that reply and
every later one on the socket stay unread: the request waits forever. (This hung the
first execution after a kernel started on demand: its request went out while the reply
to the start-up handshake was landing.)
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from queue import Empty
from typing import Any

import zmq.asyncio
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import AsyncKernelManager

from bac_kernel._inbox import Message
from bac_kernel._languages import Language

_log = logging.getLogger(__name__)


class _OneSpec(KernelSpecManager):
    """Serves the single kernelspec of one language, built in code rather than read from disk."""

    def __init__(self, language: Language) -> None:
        super().__init__()
        self._language = language

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        return KernelSpec(
            argv=list(self._language.argv),
            language=self._language.name,
            display_name=self._language.name,
            interrupt_mode="signal",
        )


def kernel_manager(language: Language) -> AsyncKernelManager:
    """A manager for one process of `language`'s kernel (fresh ports at each start)."""
    return AsyncKernelManager(
        kernel_name=f"bac-{language.name}", kernel_spec_manager=_OneSpec(language)
    )


def kernel_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    return env


def process_of(km: AsyncKernelManager | None) -> Any:
    """The `subprocess.Popen` of the kernel `km` launched, if any."""
    provisioner = km.provisioner if km is not None else None
    return getattr(provisioner, "process", None)


class Requests:
    """Builds shell requests with the client's session and sends them through pyzmq's
    asyncio send, which looks at the socket again afterwards and wakes its reader if a
    reply is waiting. (It is the stream `Session.send` writes to.)"""

    def __init__(self, kc: AsyncKernelClient) -> None:
        self._session = kc.session
        self._socket: zmq.asyncio.Socket = kc.shell_channel.socket

    def send(self, msg_type: str, content: dict[str, Any]) -> str:
        """Send one request; its msg_id."""
        msg = self._session.msg(msg_type, content)
        self._session.send(self, msg)  # a duck-typed stream: it has send_multipart
        return str(msg["header"]["msg_id"])

    def execute(self, code: str, *, silent: bool, store_history: bool, stop_on_error: bool) -> str:
        """Send an execute_request (stdin is never allowed); its msg_id."""
        return self.send("execute_request", {
            "code": code, "silent": silent, "store_history": store_history,
            "user_expressions": {}, "allow_stdin": False, "stop_on_error": stop_on_error,
        })

    def send_multipart(self, parts: Sequence[Any], copy: bool = True, **_: Any) -> None:
        sent = asyncio.ensure_future(self._socket.send_multipart(parts, copy=copy))
        sent.add_done_callback(_log_send_failure)


def _log_send_failure(sent: asyncio.Future[Any]) -> None:
    # A request that never left is noticed by its round trip (the kernel never takes it).
    if not sent.cancelled() and sent.exception() is not None:
        _log.error("sending a request to the kernel failed: %r", sent.exception())


async def pump(
    channel: str,
    get: Callable[[], Awaitable[Message]],
    deliver: Callable[[str, Message], None],
    failed: Callable[[str, Exception], None],
) -> None:
    """Read `channel` until cancelled, handing each message to `deliver`; a read that
    fails ends the loop through `failed` (nothing more would be heard on it)."""
    try:
        while True:
            try:
                msg = await get()
            except Empty:  # a wake-up with nothing to read after all: wait again
                continue
            deliver(channel, msg)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        _log.error("reading the kernel's %s channel failed: %r", channel, exc)
        failed(channel, exc)


class ExitWatch:
    """Calls `on_exit(code)` once when `process` exits, observed through a pidfd."""

    def __init__(self, process: Any, on_exit: Callable[[int | None], None]) -> None:
        self._process = process
        self._on_exit = on_exit
        self._fd: int | None = None
        try:
            self._fd = os.pidfd_open(process.pid)
        except OSError:  # already reaped, or no pidfd support: callers also poll is_alive
            return
        asyncio.get_running_loop().add_reader(self._fd, self._exited)

    def _exited(self) -> None:
        self.close()
        self._on_exit(self._process.poll())

    def close(self) -> None:
        if self._fd is not None:
            asyncio.get_running_loop().remove_reader(self._fd)
            os.close(self._fd)
            self._fd = None
