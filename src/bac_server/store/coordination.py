"""What several API replicas on one database tell each other (docs/scale-out.md).

Every write of a sandbox's row is announced, with the writer's ``origin``, to the other
replicas, which read the row again: each replica's registry follows every sandbox, whoever
changed it. A replica also announces which sandboxes had traffic through it lately, so
the one running the idle policy sees activity it did not serve. And one replica at a time
holds the leadership, under which the loops that must run once run (timers, health
checks, metering, webhooks): a lock of the database, released when its holder's session
ends, so a replica that dies frees it without anyone deciding anything.

On SQLite (one process) nothing is announced and the one process always leads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

# Told that the sandbox's row changed (another replica wrote it); "*" after the
# announcements were interrupted: anything may have changed.
OnSandbox = Callable[[str], None]
OnActivity = Callable[[Sequence[str]], None]
OnLeading = Callable[[bool], Awaitable[None]]


class Coordination(Protocol):
    @property
    def origin(self) -> str:
        """This process's name in its announcements."""
        ...

    async def follow(self, on_sandbox: OnSandbox, on_activity: OnActivity) -> None:
        """Call back for the other replicas' announcements until cancelled, listening again
        (and calling ``on_sandbox("*")``) after a lost connection."""
        ...

    async def announce_activity(self, sandbox_ids: Sequence[str]) -> None: ...

    async def lead(self, on_leading: OnLeading, retry_s: float = 2.0) -> None:
        """Until cancelled: try to take the leadership every ``retry_s``; once taken, call
        ``on_leading(True)``, and ``on_leading(False)`` if the session holding it is lost
        (then it is not retried: the caller decides)."""
        ...

    async def take_step(self, sandbox_id: str, until: float) -> bool:
        """Take (or, held by this process, extend) the lease on the sandbox's lifecycle
        steps until ``until`` (epoch seconds): True, unless another process holds one
        that has not expired."""
        ...

    async def end_step(self, sandbox_id: str) -> None:
        """Give this process's lease on the sandbox back (nothing if it holds none)."""
        ...
