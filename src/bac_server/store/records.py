"""Rows the store keeps, as plain frozen data (no ORM objects escape the store)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class TeamRecord:
    team_id: str
    name: str
    created_at: datetime


@dataclass(frozen=True)
class ApiKeyRecord:
    key_id: str
    team_id: str
    name: str
    key_hash: str  # sha256 hex of the whole key; the key itself is never stored
    prefix: str  # first characters of the key, to recognise it in listings
    created_at: datetime
    revoked_at: datetime | None = None


@dataclass(frozen=True)
class SandboxRecord:
    sandbox_id: str
    team_id: str
    template_id: str
    alias: str | None
    state: str
    started_at: datetime
    end_at: datetime
    cpu_count: int
    memory_mb: int
    disk_mb: int
    envd_access_token: str
    traffic_access_token: str | None
    metadata: dict[str, str] = field(default_factory=dict)
    env_vars: dict[str, str] = field(default_factory=dict)
    network: dict[str, Any] | None = None
    allow_internet_access: bool | None = None
    ended_at: datetime | None = None
    # What happens at the timeout, auto-resume, how it is paused (see control.lifecycle).
    lifecycle: dict[str, Any] | None = None


@dataclass(frozen=True)
class EventRecord:
    sandbox_id: str
    team_id: str
    at: datetime
    kind: str  # created, started, timeout_set, connected, timeout, killed, died, ...
    message: str
    level: str = "info"
    fields: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MetricRecord:
    sandbox_id: str
    at: datetime
    cpu_count: int
    cpu_used_pct: float
    mem_used: int
    mem_total: int
    mem_cache: int
    disk_used: int
    disk_total: int


@dataclass(frozen=True)
class CheckpointRecord:
    """A saved state of a sandbox: a point of its timeline (``kind="checkpoint"``, ends
    with the sandbox) or a snapshot (``kind="snapshot"``, outlives it, starts sandboxes)."""

    checkpoint_id: str
    team_id: str
    sandbox_id: str  # the sandbox it was taken from
    kind: str
    name: str | None
    created_at: datetime
    size_bytes: int
    memory: bool
    template_id: str
    # The envd token in force when it was taken: a restored envd still expects it once.
    envd_access_token: str
    cpu_count: int
    memory_mb: int
    env_vars: dict[str, str] = field(default_factory=dict)
