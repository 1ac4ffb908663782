"""Converting between the store's records and table rows (times as epoch seconds; env vars
and access tokens sealed, see :mod:`bac_server.store.sealing`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bac_server.store.keys import ApiKeyRecord
from bac_server.store.sandboxes import EventRecord, SandboxRecord
from bac_server.store.sealing import Sealer


def ts(value: datetime) -> float:
    return value.timestamp()


def dt(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


def opt_dt(value: float | None) -> datetime | None:
    return None if value is None else dt(value)


def key_record(row: Any) -> ApiKeyRecord:
    return ApiKeyRecord(
        key_id=row.key_id,
        team_id=row.team_id,
        name=row.name,
        key_hash=row.key_hash,
        prefix=row.prefix,
        created_at=dt(row.created_at),
        revoked_at=opt_dt(row.revoked_at),
    )


def sandbox_values(s: SandboxRecord, sealer: Sealer) -> dict[str, Any]:
    def where(column: str) -> str:
        return f"sandboxes.{column}:{s.sandbox_id}"

    return {
        "sandbox_id": s.sandbox_id,
        "team_id": s.team_id,
        "template_id": s.template_id,
        "alias": s.alias,
        "state": s.state,
        "started_at": ts(s.started_at),
        "end_at": ts(s.end_at),
        "ended_at": None if s.ended_at is None else ts(s.ended_at),
        "cpu_count": s.cpu_count,
        "memory_mb": s.memory_mb,
        "disk_mb": s.disk_mb,
        "envd_access_token": sealer.seal(s.envd_access_token, where("envd_access_token")),
        "traffic_access_token": sealer.seal_optional(s.traffic_access_token,
                                                     where("traffic_access_token")),
        "metadata": s.metadata,
        "env_vars": sealer.seal_map(s.env_vars, where("env_vars")),
        "network": s.network,
        "allow_internet_access": s.allow_internet_access,
        "lifecycle": s.lifecycle,
    }


def sandbox_record(row: Any, sealer: Sealer) -> SandboxRecord:
    def where(column: str) -> str:
        return f"sandboxes.{column}:{row.sandbox_id}"

    return SandboxRecord(
        sandbox_id=row.sandbox_id,
        team_id=row.team_id,
        template_id=row.template_id,
        alias=row.alias,
        state=row.state,
        started_at=dt(row.started_at),
        end_at=dt(row.end_at),
        cpu_count=row.cpu_count,
        memory_mb=row.memory_mb,
        disk_mb=row.disk_mb,
        envd_access_token=sealer.open(row.envd_access_token, where("envd_access_token")),
        traffic_access_token=sealer.open_optional(row.traffic_access_token,
                                                  where("traffic_access_token")),
        metadata=dict(row.metadata),
        env_vars=sealer.open_map(row.env_vars, where("env_vars")),
        network=row.network,
        allow_internet_access=row.allow_internet_access,
        ended_at=opt_dt(row.ended_at),
        lifecycle=row.lifecycle,
    )


def event_values(e: EventRecord) -> dict[str, Any]:
    return {
        "sandbox_id": e.sandbox_id,
        "team_id": e.team_id,
        "at": ts(e.at),
        "kind": e.kind,
        "level": e.level,
        "message": e.message,
        "fields": e.fields,
    }
