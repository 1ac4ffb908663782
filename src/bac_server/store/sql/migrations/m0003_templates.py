"""Version 3: templates built by teams, their builds, build logs, tags, uploaded build
contexts, and the build each sandbox was created from.

Frozen: never edit a released step; add a new one instead.
"""

from __future__ import annotations

import sqlalchemy as sa

VERSION = 3


def upgrade(conn: sa.Connection) -> None:
    md = sa.MetaData()
    sa.Table(
        "templates",
        md,
        sa.Column("template_id", sa.String(64), primary_key=True),
        sa.Column("team_id", sa.String(64), nullable=False, index=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("public", sa.Boolean, nullable=False),
        sa.Column("aliases", sa.JSON, nullable=False),
        sa.Column("cpu_count", sa.Integer, nullable=True),
        sa.Column("memory_mb", sa.Integer, nullable=True),
        sa.Column("disk_mb", sa.Integer, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("build_count", sa.Integer, nullable=False),
        sa.Column("spawn_count", sa.Integer, nullable=False),
        sa.Column("last_spawned_at", sa.Float, nullable=True),
        sa.UniqueConstraint("team_id", "name", name="uq_templates_team_name"),
    )
    sa.Table(
        "template_builds",
        md,
        sa.Column("build_id", sa.String(64), primary_key=True),
        sa.Column("template_id", sa.String(64), nullable=False, index=True),
        sa.Column("team_id", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float, nullable=True),
        sa.Column("finished_at", sa.Float, nullable=True),
        sa.Column("cpu_count", sa.Integer, nullable=True),
        sa.Column("memory_mb", sa.Integer, nullable=True),
        sa.Column("disk_mb", sa.Integer, nullable=True),
        sa.Column("tags", sa.JSON, nullable=False),
        sa.Column("recipe", sa.JSON, nullable=True),
        sa.Column("digest", sa.String(128), nullable=True),
        sa.Column("config", sa.JSON, nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("reason_step", sa.String(32), nullable=True),
    )
    sa.Table(
        "template_build_logs",
        md,
        sa.Column("build_id", sa.String(64), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("level", sa.String(8), nullable=False),
        sa.Column("step", sa.String(32), nullable=True),
        sa.Column("message", sa.Text, nullable=False),
    )
    sa.Table(
        "template_tags",
        md,
        sa.Column("template_id", sa.String(64), primary_key=True),
        sa.Column("tag", sa.String(128), primary_key=True),
        sa.Column("build_id", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    sa.Table(
        "template_uploads",
        md,
        sa.Column("team_id", sa.String(64), primary_key=True),
        sa.Column("files_hash", sa.String(128), primary_key=True),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    sa.Table(
        "sandbox_templates",
        md,
        sa.Column("sandbox_id", sa.String(64), primary_key=True),
        sa.Column("template_id", sa.String(64), nullable=False),
        sa.Column("build_id", sa.String(64), nullable=False),
        sa.Column("digest", sa.String(128), nullable=False),
    )
    md.create_all(conn)
