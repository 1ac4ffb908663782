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
