"""One Jupyter kernel process and the channels to it.

Every message the kernel sends (iopub and shell) and the kernel's own exit land in one
inbox queue (`bac_kernel._inbox`). Process exit is observed through a pidfd (an event, not
polling). A channel reader that fails kills the kernel, so its exit ends whatever waits:
a kernel we can no longer hear is as good as dead.

Lifecycle (a restart goes back through STARTING; CLOSED is final):

    STARTING → READY → DEAD → STARTING
        ↘        ↘      ↘
          ──────── CLOSED

The launch, requests, channel readers and exit watch live in `_kernel_process`; the
start-up handshake in `_handshake`; a request's round trip in `_exchange`.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging

import zmq
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager

from bac_kernel._errors import KernelDiedError, KernelError
from bac_kernel._handshake import handshake
from bac_kernel._inbox import InboxItem, Incoming, KernelExited, Message
from bac_kernel._kernel_process import (
    ExitWatch,
    Requests,
    kernel_env,
    kernel_manager,
    process_of,
    pump,
)
from bac_kernel._languages import Language
from bac_kernel._process_tree import kill_tree

START_TIMEOUT = 120.0  # tslab compiles TypeScript's checker at start: ~10 s on a busy 2-CPU box
#: A running kernel must take a request (say `busy` for it) within this many seconds, or
#: it is killed as wedged. Generous: a swapped-out kernel on a loaded box is slow, not dead.
ACK_TIMEOUT = 60.0
#: Attempts at starting a kernel that exits during start-up (a port another process took
#: between jupyter_client choosing it and the kernel binding it).
START_ATTEMPTS = 3

_log = logging.getLogger(__name__)


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


class Kernel:
    """A kernel of one language, started in `cwd`; restartable until closed."""

    def __init__(self, language: Language, cwd: str, *, ack_timeout: float = ACK_TIMEOUT) -> None:
        self.language = language
        self.cwd = cwd
        self.ack_timeout = ack_timeout
        self.state = KernelState.STARTING
        self.generation = 0
        #: Why the process is about to die, when we kill it on purpose (restart, removal).
        self.exit_reason: str | None = None
        self.inbox: asyncio.Queue[InboxItem] = asyncio.Queue()
        self._km: AsyncKernelManager | None = None
        self._kc: AsyncKernelClient | None = None
        self._requests: Requests | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._exit_watch: ExitWatch | None = None
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

    def execute(self, code: str, *, silent: bool, store_history: bool, stop_on_error: bool) -> str:
        """Send an execute_request; its msg_id."""
        if self._requests is None or self.state is not KernelState.READY:
            raise KernelDiedError(f"the {self.language.name} kernel is not running")
        return self._requests.execute(
            code, silent=silent, store_history=store_history, stop_on_error=stop_on_error
        )

    async def start(self) -> None:
        """Launch the process and wait until it answers on shell and iopub, starting it
        again (on fresh ports) when it exits while starting."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                await self._start_once()
                return
            except KernelDiedError as exc:
                if attempt == START_ATTEMPTS or self.state is KernelState.CLOSED:
                    raise KernelError(
                        f"the {self.language.name} kernel did not become ready: {exc}"
                    ) from exc
                _log.warning("the %s kernel exited while starting (%s); starting it again",
                             self.language.name, exc)

    async def _start_once(self) -> None:
        if self.state is not KernelState.STARTING:
            self._move(KernelState.STARTING)
        self.generation += 1
        self.exit_reason = None
        self.inbox = asyncio.Queue()
        self._km = km = kernel_manager(self.language)
        try:
            await km.start_kernel(cwd=self.cwd, env=kernel_env())
        except Exception as exc:
            await self._teardown()
            self._mark_dead()
            raise KernelError(f"could not start the {self.language.name} kernel: {exc}") from exc
        kc: AsyncKernelClient = km.client()
        kc.start_channels()
        self._kc = kc
        self._requests = requests = Requests(kc)
        self._watch_exit()
        self._tasks = [
            asyncio.create_task(pump(ch, get, self._deliver, self._channel_failed))
            for ch, get in (("iopub", kc.get_iopub_msg), ("shell", kc.get_shell_msg))
        ]
        self.collecting = True
        try:
            await asyncio.wait_for(handshake(self.inbox, requests, self.is_alive,
                                                 self.language.warm_code), START_TIMEOUT)
        except (TimeoutError, KernelDiedError) as exc:
            await self._teardown()
            self._mark_dead()
            if isinstance(exc, KernelDiedError):
                raise
            raise KernelError(
                f"the {self.language.name} kernel did not become ready within "
                f"{START_TIMEOUT:.0f} s"
            ) from exc
        finally:
            self.collecting = False
        if self.state is KernelState.STARTING:
            self._move(KernelState.READY)

    def _deliver(self, channel: str, msg: Message) -> None:
        if self.collecting:
            self.inbox.put_nowait(Incoming(channel, msg))

    def _channel_failed(self, channel: str, exc: Exception) -> None:
        # Nothing more will be heard on this channel: end the kernel (its exit ends whatever
        # waits) rather than let a request wait for a reply that can no longer arrive.
        self.exit_reason = f"the connection to the kernel failed ({channel}: {exc!r})"
        self.kill()

    def nudge(self) -> None:
        """Send a no-op request (kernel_info) on shell: a message stranded on either end
        of the connection by a lost ZeroMQ wake-up is read once the next one passes that
        way (the kernel's socket gets a new message; ours is looked at again after the
        send). Harmless otherwise."""
        if self._requests is not None and self.state is KernelState.READY:
            with contextlib.suppress(zmq.ZMQError):  # best effort: the deadline still holds
                self._requests.send("kernel_info_request", {})

    def _watch_exit(self) -> None:
        process = process_of(self._km)
        if process is None:
            return
        generation = self.generation

        def exited(code: int | None) -> None:
            if generation == self.generation:
                self._mark_dead()
            self.inbox.put_nowait(KernelExited(generation, code))

        self._exit_watch = ExitWatch(process, exited)

    def is_alive(self) -> bool:
        process = process_of(self._km)
        return process is not None and process.poll() is None

    async def interrupt(self) -> None:
        """SIGINT to the kernel's process group, as a notebook's stop button does."""
        if self._km is not None and self.is_alive():
            with contextlib.suppress(OSError, RuntimeError):
                await self._km.interrupt_kernel()

    def kill(self) -> None:
        """SIGKILL the kernel and all it started, now; the exit arrives in the inbox."""
        process = process_of(self._km)
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
        if self._exit_watch is not None:
            self._exit_watch.close()
            self._exit_watch = None
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        self._requests = None
        if self._kc is not None:
            self._kc.stop_channels()
            self._kc = None
        if self._km is not None:
            self.kill()
            with contextlib.suppress(Exception):
                await self._km.shutdown_kernel(now=True)
            self._km = None
