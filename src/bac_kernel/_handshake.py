"""The start-up handshake: proof that a new kernel hears us on shell and we hear it on iopub.

A kernel_info reply proves shell works; the idle status of a silent empty cell proves our
iopub subscription is live (messages published before it are lost). Each request is sent
again every `STEP` seconds until its answer comes, since a kernel still binding its
sockets, or a subscription still being set up, loses what was sent before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from bac_kernel._errors import KernelDiedError
from bac_kernel._inbox import InboxItem, Incoming, KernelExited
from bac_kernel._kernel_process import Requests

STEP = 1.0

def _silent_cell(code: str) -> dict[str, object]:
    return {
        "code": code, "silent": True, "store_history": False, "user_expressions": {},
        "allow_stdin": False, "stop_on_error": False,
    }


async def handshake(
    inbox: asyncio.Queue[InboxItem], requests: Requests, is_alive: Callable[[], bool],
    warm_code: str = "",
) -> None:
    """Return once the kernel answered on both channels; KernelDiedError if it exits.

    The silent cell that proves iopub runs ``warm_code`` (the language's own, see
    `Language.warm_code`): code paths a first cell would otherwise load, run now so that
    a kernel started ahead (a template's start snapshot) answers its first cell as fast as
    its next. Silent and kept out of history, it changes no execution count, no `_` and
    no output. Its reply may come after this returns: replies are matched by request."""
    await _retry_until(
        inbox, lambda: requests.send("kernel_info_request", {}), "shell", "kernel_info_reply",
        is_alive,
    )
    await _retry_until(
        inbox, lambda: requests.send("execute_request", _silent_cell(warm_code)), "iopub",
        "status", is_alive,
    )


async def _retry_until(
    inbox: asyncio.Queue[InboxItem],
    send: Callable[[], str],
    channel: str,
    msg_type: str,
    is_alive: Callable[[], bool],
) -> None:
    loop = asyncio.get_running_loop()
    while True:
        msg_id = send()
        deadline = loop.time() + STEP
        while (left := deadline - loop.time()) > 0:
            try:
                item = await asyncio.wait_for(inbox.get(), left)
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
        if not is_alive():  # gone without an exit notice (no pidfd to watch)
            raise KernelDiedError("the kernel exited while starting")
