"""Version 2: each sandbox's lifecycle settings, and checkpoints (timelines and snapshots).

Frozen: never edit a released step; add a new one instead.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations

VERSION = 2


def upgrade(conn: sa.Connection) -> None:
    Operations(MigrationContext.configure(conn)).add_column(
        "sandboxes", sa.Column("lifecycle", sa.JSON, nullable=True))
    md = sa.MetaData()
    sa.Table(
        "checkpoints",
        md,
        sa.Column("checkpoint_id", sa.String(64), primary_key=True),
        sa.Column("team_id", sa.String(64), nullable=False, index=True),
        sa.Column("sandbox_id", sa.String(64), nullable=False, index=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("memory", sa.Boolean, nullable=False),
        sa.Column("template_id", sa.String(255), nullable=False),
        sa.Column("envd_access_token", sa.String(128), nullable=False),
        sa.Column("cpu_count", sa.Integer, nullable=False),
        sa.Column("memory_mb", sa.Integer, nullable=False),
        sa.Column("env_vars", sa.JSON, nullable=False),
    )
    md.create_all(conn)
