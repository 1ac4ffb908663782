"""What lands in a kernel's inbox: its messages, its exit, and a client's departure.

Every source a waiting request cares about feeds one `asyncio.Queue`, so a request waits on
a single `await inbox.get()` instead of racing several sources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Message = dict[str, Any]


@dataclass(frozen=True)
class KernelExited:
    """The kernel process of `generation` exited with `code`."""

    generation: int
    code: int | None


@dataclass(frozen=True)
class Incoming:
    """One message from the kernel, with the channel it came on."""

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


class Abandoned:
    """The client of the running request has gone."""


InboxItem = Incoming | KernelExited | Abandoned
