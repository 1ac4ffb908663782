"""The template catalog: templates (a name unique in the team, aliases, visibility), their
tags, and the build each sandbox was created from. :class:`CatalogStore` serves the catalog
and the resolution of a template for a create or a resume (``control.templates``)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class TemplateRecord:
    """A team's template: a name (unique in the team), its builds and tags.

    ``cpu_count``/``memory_mb``/``disk_mb`` are the defaults its sandboxes get (those of its
    latest ready build); ``None`` means the server's defaults."""

    template_id: str
    team_id: str
    name: str
    public: bool
    created_at: datetime
    updated_at: datetime
    aliases: tuple[str, ...] = ()  # extra names it is found by (E2B's legacy ``alias``)
    cpu_count: int | None = None
    memory_mb: int | None = None
    disk_mb: int | None = None
    build_count: int = 0
    spawn_count: int = 0
    last_spawned_at: datetime | None = None


@dataclass(frozen=True)
class TagRecord:
    template_id: str
    tag: str
    build_id: str
    created_at: datetime


@dataclass(frozen=True)
class SandboxPin:
    """The build a sandbox was created from, so resuming it later finds the same layers
    even after the template was rebuilt or deleted."""

    sandbox_id: str
    template_id: str
    build_id: str
    digest: str


class CatalogStore(Protocol):
    """Every method is one transaction."""

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

    # tags ---------------------------------------------------------------------------------
    async def set_tags(self, template_id: str, tags: Collection[str], build_id: str,
                       at: datetime) -> None: ...

    async def delete_tags(self, template_id: str, tags: Collection[str]) -> int: ...

    async def list_tags(self, template_id: str) -> list[TagRecord]: ...

    # which build each sandbox came from ---------------------------------------------------
    async def pin_sandbox(self, pin: SandboxPin) -> None: ...

    async def sandbox_pin(self, sandbox_id: str) -> SandboxPin | None: ...
