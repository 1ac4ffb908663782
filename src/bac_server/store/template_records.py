"""Rows the store keeps for templates: templates, their builds and build logs, tags, uploaded
build contexts, and which build each sandbox was created from."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


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
class BuildRecord:
    """One build of a template. ``recipe`` is what was asked (registry password removed),
    ``None`` until the build is started; ``tags`` are what it takes when it ends ready."""

    build_id: str
    template_id: str
    team_id: str
    status: str  # waiting | building | ready | error (control.template_builds_states)
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


@dataclass(frozen=True)
class TagRecord:
    template_id: str
    tag: str
    build_id: str
    created_at: datetime


@dataclass(frozen=True)
class UploadRecord:
    """A build context a team uploaded (a tar, gzipped or not), keyed by the SDK's hash."""

    team_id: str
    files_hash: str
    path: str
    size_bytes: int
    created_at: datetime


@dataclass(frozen=True)
class SandboxPin:
    """The build a sandbox was created from, so resuming it later finds the same layers
    even after the template was rebuilt or deleted."""

    sandbox_id: str
    template_id: str
    build_id: str
    digest: str
