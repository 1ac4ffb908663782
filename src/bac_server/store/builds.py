"""Template builds and their logs: what :class:`BuildStore` keeps for the build queue
(``control.builds``: the queue and its log writer; the catalog's build listings).

Status changes are compare-and-set (``from_states``): a cancel racing the build's own end,
or a restart sweep racing a late writer, changes the row once and the loser learns it lost.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True)
class BuildRecord:
    """One build of a template. ``recipe`` is what was asked (registry password removed),
    ``None`` until the build is started; ``tags`` are what it takes when it ends ready."""

    build_id: str
    template_id: str
    team_id: str
    status: str  # waiting | building | ready | error (control.templates.BuildStatus)
    created_at: datetime
    updated_at: datetime
    # What the build request asked for (None: the server's default); they become the
    # defaults of sandboxes created from this build.
    cpu_count: int | None = None
    memory_mb: int | None = None
    disk_mb: int | None = None
    tags: tuple[str, ...] = ("default",)
    recipe: dict[str, Any] | None = None
    digest: str | None = None  # the built template's content digest, once ready
    config: dict[str, Any] | None = None  # the built template's user/workdir/env/start cmd
    reason: str | None = None  # why it ended in error
    reason_step: str | None = None  # "base", "1".., "finalize" (E2B's step names)
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True)
class BuildLogRecord:
    build_id: str
    seq: int  # 0-based position in the build's log: the SDK's ``logsOffset``
    at: datetime
    level: str  # debug | info | warn | error
    message: str
    step: str | None = None


class BuildStore(Protocol):
    """Every method is one transaction."""

    async def add_build(self, build: BuildRecord) -> None:
        """``StoreConflict`` if the id exists."""
        ...

    async def get_build(self, build_id: str) -> BuildRecord | None: ...

    async def list_builds(self, template_id: str) -> list[BuildRecord]:
        """Newest first."""
        ...

    async def builds_in_states(self, states: Collection[str]) -> list[BuildRecord]:
        """Every team's builds in ``states``, oldest first (the unfinished ones: the
        uploads their COPY steps still need)."""
        ...

    async def start_build(self, build_id: str, *, from_states: Collection[str], status: str,
                          at: datetime, recipe: dict[str, Any] | None = None) -> bool:
        """Move the build to ``status`` if it is in one of ``from_states`` (compare and set);
        ``recipe`` is stored when given. Returns whether it moved."""
        ...

    async def finish_build(self, build_id: str, *, status: str, at: datetime,
                           from_states: Collection[str], digest: str | None = None,
                           config: dict[str, Any] | None = None, reason: str | None = None,
                           reason_step: str | None = None) -> list[str]:
        """End the build (compare and set against ``from_states``). A ready build takes
        each of its tags unless a newer build holds it, and then sets its template's default
        resources. Returns the tags it took (empty when it did not end here or took none)."""
        ...

    async def fail_unfinished_builds(self, reason: str, at: datetime,
                                     untouched_since: datetime | None = None) -> list[str]:
        """End every waiting or building build in error (a restart); returns their ids.
        ``untouched_since``: only those whose row has not changed since (the builds of a
        replica that is gone: a running build's row is touched while it runs)."""
        ...

    async def touch_builds(self, build_ids: Sequence[str], at: datetime) -> None:
        """Say that these unfinished builds are still being run (their ``updated_at``)."""
        ...

    # build logs ---------------------------------------------------------------------------
    async def add_build_logs(self, entries: Sequence[BuildLogRecord]) -> None: ...

    async def build_logs(self, build_id: str, *, offset: int = 0, limit: int,
                         levels: Collection[str] | None = None, since: datetime | None = None,
                         newest_first: bool = False) -> list[BuildLogRecord]:
        """Entries in log order (or reversed), ``offset`` counted after the filters."""
        ...
