"""Times as the tables keep them: float seconds since the epoch (UTC), sortable and the same
on SQLite and PostgreSQL; records carry aware datetimes."""

from __future__ import annotations

from datetime import UTC, datetime


def ts(value: datetime) -> float:
    return value.timestamp()


def dt(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


def opt_dt(value: float | None) -> datetime | None:
    return None if value is None else dt(value)
