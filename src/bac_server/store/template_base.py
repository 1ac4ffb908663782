"""The store's template half: what the control plane persists about templates and builds.

Part of :class:`bac_server.store.base.Store` (which extends this protocol); kept apart so
each file stays readable. Every method is one transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, Protocol

from bac_server.store.template_records import (
    BuildLogRecord,
    BuildRecord,
    SandboxPin,
    TagRecord,
    TemplateRecord,
    UploadRecord,
)


class TemplateRecords(Protocol):
    # templates ----------------------------------------------------------------------------
    async def add_template(self, template: TemplateRecord) -> None:
        """``StoreConflict`` if the id exists or the team already has a template so named."""
        ...

    async def get_template(self, template_id: str) -> TemplateRecord | None: ...

    async def visible_templates(self, team_id: str) -> list[TemplateRecord]:
        """The team's templates and every public one, oldest first."""
        ...

    async def update_template(self, template_id: str, *, at: datetime,
                              public: bool | None = None) -> bool: ...

    async def delete_template(self, template_id: str) -> bool:
        """Delete the template with its builds, build logs and tags."""
        ...

    async def template_spawned(self, template_id: str, at: datetime) -> None:
        """Count one sandbox created from the template."""
        ...

    # builds -------------------------------------------------------------------------------
    async def add_build(self, build: BuildRecord) -> None: ...

    async def get_build(self, build_id: str) -> BuildRecord | None: ...

    async def list_builds(self, template_id: str) -> list[BuildRecord]:
        """Newest first."""
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

    async def fail_unfinished_builds(self, reason: str, at: datetime) -> list[str]:
        """End every waiting or building build in error (a restart); returns their ids."""
        ...

    # build logs ---------------------------------------------------------------------------
    async def add_build_logs(self, entries: Sequence[BuildLogRecord]) -> None: ...

    async def build_logs(self, build_id: str, *, offset: int = 0, limit: int,
                         levels: Collection[str] | None = None, since: datetime | None = None,
                         newest_first: bool = False) -> list[BuildLogRecord]:
        """Entries in log order (or reversed), ``offset`` counted after the filters."""
        ...

    # tags ---------------------------------------------------------------------------------
    async def set_tags(self, template_id: str, tags: Collection[str], build_id: str,
                       at: datetime) -> None: ...

    async def delete_tags(self, template_id: str, tags: Collection[str]) -> int: ...

    async def list_tags(self, template_id: str) -> list[TagRecord]: ...

    # uploaded build contexts --------------------------------------------------------------
    async def add_upload(self, upload: UploadRecord) -> None:
        """Insert or replace (the same hash uploaded again replaces the file)."""
        ...

    async def get_upload(self, team_id: str, files_hash: str) -> UploadRecord | None: ...

    # which build each sandbox came from ---------------------------------------------------
    async def pin_sandbox(self, pin: SandboxPin) -> None: ...

    async def sandbox_pin(self, sandbox_id: str) -> SandboxPin | None: ...

    async def prune_pins(self, live_states: Collection[str]) -> int:
        """Forget the pins of sandboxes in none of ``live_states`` and with no checkpoint."""
        ...
