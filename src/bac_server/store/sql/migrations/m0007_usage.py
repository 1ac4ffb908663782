"""Version 7: usage per sandbox and UTC day (what the meter accrued, and up to when), and
the teams' cost caps.

Needs no step before it: it only adds tables.

Frozen: never edit a released step; add a new one instead.
"""

from __future__ import annotations

import sqlalchemy as sa

from bac_server.store.sealing import Sealer

VERSION = 7


def upgrade(conn: sa.Connection, sealer: Sealer) -> None:
    md = sa.MetaData()
    sa.Table(
        "usage_days", md,
        sa.Column("sandbox_id", sa.String(64), primary_key=True),
        sa.Column("day", sa.String(10), primary_key=True),
        sa.Column("team_id", sa.String(64), nullable=False),
        sa.Column("vcpu_seconds", sa.Float, nullable=False),
        sa.Column("memory_gib_seconds", sa.Float, nullable=False),
        sa.Column("storage_gib_hours", sa.Float, nullable=False),
        sa.Column("cpu_used_seconds", sa.Float, nullable=False),
        sa.Column("metered_until", sa.Float, nullable=False),
        sa.Index("ix_usage_days_team", "team_id", "day"),
    )
    sa.Table(
        "cost_caps", md,
        sa.Column("cap_id", sa.String(64), primary_key=True),
        sa.Column("team_id", sa.String(64), nullable=False, index=True),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("period", sa.String(16), nullable=False),
        sa.Column("amount", sa.Float, nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("sandbox_id", sa.String(64), nullable=True, index=True),
        sa.Column("metadata_key", sa.String(255), nullable=True),
        sa.Column("metadata_value", sa.Text, nullable=True),
        sa.Column("warned", sa.String(16), nullable=True),
        sa.Column("reached", sa.String(16), nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    md.create_all(conn)
