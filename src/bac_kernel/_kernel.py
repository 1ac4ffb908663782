"""One Jupyter kernel process and the channels to it.

Every message the kernel sends (iopub and shell) and the kernel's own exit land in one
inbox queue, so a running cell waits on a single `await inbox.get()` instead of racing
several sources. Process exit is observed through a pidfd (an event, not polling).

Lifecycle (a restart goes back through STARTING; CLOSED is final):

    STARTING → READY → DEAD → STARTING
        ↘        ↘      ↘
          ──────── CLOSED

(A little over 250 lines: start-up, the inbox pumps and the exit watch share the state of
one process generation, and splitting them would spread that state across modules.)
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
from dataclasses import dataclass
from typing import Any

from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import AsyncKernelManager

from bac_kernel._errors import KernelDiedError, KernelError
from bac_kernel._languages import Language
from bac_kernel._process_tree import kill_tree

START_TIMEOUT = 120.0  # tslab compiles TypeScript's checker at start: ~10 s on a busy 2-CPU box
_HANDSHAKE_STEP = 1.0

Message = dict[str, Any]


class KernelState(enum.Enum):
    STARTING = "starting"
    READY = "ready"
    DEAD = "dead"
    CLOSED = "closed"


_TRANSITIONS: dict[KernelState, frozenset[KernelState]] = {
    KernelState.STARTING: frozenset({KernelState.READY, KernelState.DEAD, KernelState.CLOSED}),
    KernelState.READY: frozenset({KernelState.DEAD, KernelState.STARTING, KernelState.CLOSED}),
    KernelState.DEAD: frozenset({KernelState.STARTING, KernelState.CLOSED}),
    KernelState.CLOSED: frozenset(),
}


@dataclass(frozen=True)
class KernelExited:
    """Inbox item: the kernel process of `generation` exited with `code`."""

    generation: int
    code: int | None


@dataclass(frozen=True)
class Incoming:
    """Inbox item: one message from the kernel, with the channel it came on."""

    channel: str
    msg: Message

    @property
    def parent_id(self) -> str | None:
        parent = self.msg.get("parent_header") or {}
        value = parent.get("msg_id")
        return value if isinstance(value, str) else None

    @property
    def msg_type(self) -> str:
        return str(self.msg["header"]["msg_type"])


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


class Kernel:
    """A kernel of one language, started in `cwd`; restartable until closed."""

    def __init__(self, language: Language, cwd: str) -> None:
        self.language = language
        self.cwd = cwd
        self.state = KernelState.STARTING
        self.generation = 0
        #: Why the process is about to die, when we kill it on purpose (restart, removal).
        self.exit_reason: str | None = None
        self.inbox: asyncio.Queue[Incoming | KernelExited | object] = asyncio.Queue()
        self._km: AsyncKernelManager | None = None
        self._kc: AsyncKernelClient | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._pidfd: int | None = None
        #: Messages are kept only while someone waits for them (start-up, a running cell):
        #: output a kernel's background threads print between cells would otherwise pile
        #: up in the inbox for as long as no cell runs.
        self.collecting = False

    def _move(self, new: KernelState) -> None:
        if new not in _TRANSITIONS[self.state]:
            raise KernelError(f"kernel cannot go from {self.state.value} to {new.value}")
        self.state = new

    def _mark_dead(self) -> None:
        if self.state in (KernelState.STARTING, KernelState.READY):
            self._move(KernelState.DEAD)

    @property
    def client(self) -> AsyncKernelClient:
        if self._kc is None or self.state is not KernelState.READY:
            raise KernelDiedError(f"the {self.language.name} kernel is not running")
        return self._kc

    async def start(self) -> None:
        """Launch the process and wait until it answers on shell and iopub."""
        if self.state is not KernelState.STARTING:
            self._move(KernelState.STARTING)
        self.generation += 1
        self.exit_reason = None
        self.inbox = asyncio.Queue()
        km = AsyncKernelManager(
            kernel_name=f"bac-{self.language.name}", kernel_spec_manager=_OneSpec(self.language)
        )
        self._km = km
        env = dict(os.environ)
        env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        try:
            await km.start_kernel(cwd=self.cwd, env=env)
        except Exception as exc:
            self._mark_dead()
            raise KernelError(f"could not start the {self.language.name} kernel: {exc}") from exc
        kc: AsyncKernelClient = km.client()
        kc.start_channels()
        self._kc = kc
        self._watch_exit()
        self._tasks = [
            asyncio.create_task(self._pump("iopub", kc.get_iopub_msg)),
            asyncio.create_task(self._pump("shell", kc.get_shell_msg)),
        ]
        self.collecting = True
        try:
            await asyncio.wait_for(self._handshake(kc), START_TIMEOUT)
        except (TimeoutError, KernelDiedError) as exc:
            await self._teardown()
            self._mark_dead()
            raise KernelError(
                f"the {self.language.name} kernel did not become ready: {exc or 'timed out'}"
            ) from exc
        finally:
            self.collecting = False
        if self.state is KernelState.STARTING:
            self._move(KernelState.READY)

    async def _handshake(self, kc: AsyncKernelClient) -> None:
        # A kernel_info reply proves shell works; the idle status of a silent empty cell
        # proves our iopub subscription is live (messages published before it are lost).
        await self._retry_until(lambda: kc.kernel_info(), "shell", "kernel_info_reply")
        await self._retry_until(
            lambda: kc.execute("", silent=True, store_history=False), "iopub", "status"
        )

    async def _retry_until(self, send: Any, channel: str, msg_type: str) -> None:
        while True:
            msg_id = send()
            loop = asyncio.get_running_loop()
            deadline = loop.time() + _HANDSHAKE_STEP
            while (left := deadline - loop.time()) > 0:
                try:
                    item = await asyncio.wait_for(self.inbox.get(), left)
                except TimeoutError:
                    break
                if isinstance(item, KernelExited):
                    raise KernelDiedError(f"the kernel exited with code {item.code} while starting")
                if (
                    isinstance(item, Incoming)
                    and item.channel == channel
                    and item.msg_type == msg_type
                    and item.parent_id == msg_id
                    and (msg_type != "status" or item.msg["content"]["execution_state"] == "idle")
                ):
                    return

    async def _pump(self, channel: str, get: Any) -> None:
        while True:
            msg = await get()
            if self.collecting:
                self.inbox.put_nowait(Incoming(channel, msg))

    def _watch_exit(self) -> None:
        process = self._process()
        if process is None:
            return
        generation = self.generation
        try:
            fd = os.pidfd_open(process.pid)
        except OSError:  # already reaped, or no pidfd support: nothing to watch
            return
        self._pidfd = fd

        def exited() -> None:
            self._close_pidfd()
            code = process.poll()
            if generation == self.generation:
                self._mark_dead()
            self.inbox.put_nowait(KernelExited(generation, code))

        asyncio.get_running_loop().add_reader(fd, exited)

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def _process(self) -> Any:
        provisioner = self._km.provisioner if self._km is not None else None
        return getattr(provisioner, "process", None)

    def is_alive(self) -> bool:
        process = self._process()
        return process is not None and process.poll() is None

    async def interrupt(self) -> None:
        """SIGINT to the kernel's process group, as a notebook's stop button does."""
        if self._km is not None and self.is_alive():
            with contextlib.suppress(OSError, RuntimeError):
                await self._km.interrupt_kernel()

    def kill(self) -> None:
        """SIGKILL the kernel and all it started, now; the exit arrives in the inbox."""
        process = self._process()
        if process is not None and process.poll() is None:
            kill_tree(process.pid)

    async def restart(self) -> None:
        """A fresh process in the same cwd; all state of the old one is lost."""
        await self._teardown()
        await self.start()

    async def close(self) -> None:
        if self.state is KernelState.CLOSED:
            return
        self._move(KernelState.CLOSED)
        await self._teardown()

    async def _teardown(self) -> None:
        self._close_pidfd()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        if self._kc is not None:
            self._kc.stop_channels()
            self._kc = None
        if self._km is not None:
            self.kill()
            with contextlib.suppress(Exception):
                await self._km.shutdown_kernel(now=True)
            self._km = None
