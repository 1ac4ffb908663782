"""Version 1: teams, API keys, sandboxes, their event log and resource samples.

Frozen: never edit a released step; add a new one instead.
"""

from __future__ import annotations

import sqlalchemy as sa

VERSION = 1


def upgrade(conn: sa.Connection) -> None:
    md = sa.MetaData()
    sa.Table(
        "teams",
        md,
        sa.Column("team_id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    sa.Table(
        "api_keys",
        md,
        sa.Column("key_id", sa.String(64), primary_key=True),
        sa.Column("team_id", sa.String(64), sa.ForeignKey("teams.team_id"), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("prefix", sa.String(32), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("revoked_at", sa.Float, nullable=True),
    )
    sa.Table(
        "sandboxes",
        md,
        sa.Column("sandbox_id", sa.String(64), primary_key=True),
        sa.Column("team_id", sa.String(64), sa.ForeignKey("teams.team_id"), nullable=False),
        sa.Column("template_id", sa.String(255), nullable=False),
        sa.Column("alias", sa.String(255), nullable=True),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("end_at", sa.Float, nullable=False),
        sa.Column("ended_at", sa.Float, nullable=True),
        sa.Column("cpu_count", sa.Integer, nullable=False),
        sa.Column("memory_mb", sa.Integer, nullable=False),
        sa.Column("disk_mb", sa.Integer, nullable=False),
        sa.Column("envd_access_token", sa.String(128), nullable=False),
        sa.Column("traffic_access_token", sa.String(128), nullable=True),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("env_vars", sa.JSON, nullable=False),
        sa.Column("network", sa.JSON, nullable=True),
        sa.Column("allow_internet_access", sa.Boolean, nullable=True),
    )
    sa.Table(
        "sandbox_events",
        md,
        sa.Column("event_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("sandbox_id", sa.String(64), nullable=False, index=True),
        sa.Column("team_id", sa.String(64), nullable=False),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("level", sa.String(8), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("fields", sa.JSON, nullable=False),
    )
    sa.Table(
        "sandbox_metrics",
        md,
        sa.Column("sample_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("sandbox_id", sa.String(64), nullable=False, index=True),
        sa.Column("at", sa.Float, nullable=False, index=True),
        sa.Column("cpu_count", sa.Integer, nullable=False),
        sa.Column("cpu_used_pct", sa.Float, nullable=False),
        sa.Column("mem_used", sa.BigInteger, nullable=False),
        sa.Column("mem_total", sa.BigInteger, nullable=False),
        sa.Column("mem_cache", sa.BigInteger, nullable=False),
        sa.Column("disk_used", sa.BigInteger, nullable=False),
        sa.Column("disk_total", sa.BigInteger, nullable=False),
    )
    md.create_all(conn)
