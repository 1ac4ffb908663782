"""Running one cell on a kernel: send the code, turn its messages into NDJSON lines.

Each request's round trip (and every bound on its waits) is `_exchange.round_trip`. If the
client goes away the kernel is interrupted and drained, so the next cell starts on a quiet
kernel; a kernel that ignores the interrupt is killed (and then restarted by its context).
If the kernel dies, or is killed as wedged, the cell ends with an error line.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Mapping, Sequence
from typing import Any

from bac_kernel import _outputs
from bac_kernel._exchange import round_trip
from bac_kernel._inbox import Abandoned, Incoming
from bac_kernel._kernel import Kernel

_ABORT_RETRIES = 50  # tslab aborts requests that arrive within 200 ms of a failed cell


class Outcome(enum.Enum):
    DONE = "done"
    KERNEL_DIED = "kernel_died"


class Cell:
    """One `POST /execute`: the code, its env vars, and the queue its lines go to."""

    def __init__(self, code: str, env_vars: Mapping[str, str], access_token: str | None) -> None:
        self.code = code
        self.env_vars = dict(env_vars)
        self.access_token = access_token
        self.lines: asyncio.Queue[_outputs.Event] = asyncio.Queue()
        self.abandoned = False
        self._kernel: Kernel | None = None
        self._finished = False

    def emit(self, event: _outputs.Event) -> None:
        if not self.abandoned and not self._finished:
            self.lines.put_nowait(event)

    def finish(self) -> None:
        """Queue `end_of_execution`; the response ends after it. Idempotent."""
        if not self._finished:
            self.lines.put_nowait(_outputs.END)
            self._finished = True

    def abandon(self) -> None:
        """The client disconnected: stop sending, and interrupt the kernel if it runs us."""
        if self.abandoned:
            return
        self.abandoned = True
        if self._kernel is not None:
            self._kernel.inbox.put_nowait(Abandoned())

    async def run(self, kernel: Kernel, restore: Mapping[str, str | None]) -> Outcome:
        """Set env vars, run the code, put env vars back. `restore` maps names to old values."""
        self._kernel = kernel
        try:
            if self.env_vars and not await self.apply_env(kernel, self.env_vars, ()):
                return Outcome.KERNEL_DIED
            outcome = Outcome.DONE if self.abandoned else await self._user_code(kernel)
            if outcome is Outcome.DONE and self.env_vars:
                back = {k: v for k, v in restore.items() if v is not None}
                gone = [k for k, v in restore.items() if v is None]
                if not await self.apply_env(kernel, back, gone):
                    return Outcome.KERNEL_DIED
            return outcome
        finally:
            self._kernel = None

    async def apply_env(
        self, kernel: Kernel, assign: Mapping[str, str], unset: Sequence[str]
    ) -> bool:
        """Set and unset env vars in the kernel with a silent cell; False if it died."""
        code = kernel.language.env_code(assign, unset)
        def send() -> str:
            return kernel.execute(code, silent=True, store_history=False, stop_on_error=True)

        for _ in range(_ABORT_RETRIES):
            reply = await round_trip(kernel, send, None, interruptible=False)
            if reply is None:
                return False
            if reply.get("status") not in ("abort", "aborted"):
                return True
        return True

    async def _user_code(self, kernel: Kernel) -> Outcome:
        def send() -> str:
            return kernel.execute(self.code, silent=False, store_history=True, stop_on_error=False)

        for _ in range(_ABORT_RETRIES):
            state = _Collected(self)
            reply = await round_trip(kernel, send, state.route, interruptible=True)
            if reply is None:
                state.flush_main()  # a value sent before the kernel died is still its value
                self._report_death(kernel)
                return Outcome.KERNEL_DIED
            if reply.get("status") in ("abort", "aborted") and not state.emitted:
                continue
            state.flush_main()
            if reply.get("status") == "error" and not state.error_sent:
                self.emit(_outputs.error_from_reply(reply, "".join(state.stderr)))
            count = reply.get("execution_count")
            if isinstance(count, int):
                self.emit(_outputs.execution_count(count))
            return Outcome.DONE
        return Outcome.DONE

    def _report_death(self, kernel: Kernel) -> None:
        reason = kernel.exit_reason or (
            "the kernel process died; it is restarted and its state is lost"
        )
        self.emit(_outputs.error("DeadKernelError", reason, ""))


class _Collected:
    """What a user cell produced so far."""

    def __init__(self, cell: Cell) -> None:
        self._cell = cell
        self.emitted = False
        self.error_sent = False
        self.stderr: list[str] = []
        #: The latest `execute_result`, held until the cell ends: R sends one per visible
        #: top-level value, and only the last is the cell's value (the SDK takes the first
        #: main result as `execution.text`).
        self._main: dict[str, Any] | None = None

    def flush_main(self) -> None:
        if self._main is not None:
            self._cell.emit(_outputs.result(self._main, is_main=True))
            self._main = None

    def route(self, item: Incoming) -> None:
        msg, kind = item.msg, item.msg_type
        content = msg["content"]
        if kind == "stream":
            event = _outputs.stream(msg)
            if event["type"] == "stderr":
                self.stderr.append(event["text"])
        elif kind == "execute_result":
            earlier, self._main = self._main, content.get("data") or {}
            self.emitted = True
            if earlier is None:
                return
            event = _outputs.result(earlier, is_main=False)
        elif kind == "display_data":
            event = _outputs.result(content.get("data") or {}, is_main=False)
        elif kind == "error":
            if self.error_sent:
                return
            self.error_sent = True
            event = _outputs.error(
                # bash_kernel names no error (a failed command's exit status is its
                # value): a caller branching on the name still gets one.
                str(content.get("ename") or "Error"),
                str(content.get("evalue", "")),
                content.get("traceback") or [],
            )
        else:
            return
        self.emitted = True
        self._cell.emit(event)
