"""Version 12: volumes, unique by (team, name), their content API's token sealed; and the
volumes each sandbox mounts, one row per (sandbox, path).

Needs no other step after 11: it only adds tables.

Frozen: never edit a released step; add a new one instead.
"""

from __future__ import annotations

import sqlalchemy as sa

from bac_server.store.sealing import Sealer

VERSION = 12


def upgrade(conn: sa.Connection, sealer: Sealer) -> None:
    md = sa.MetaData()
    sa.Table(
        "volumes", md,
        sa.Column("volume_id", sa.String(64), primary_key=True),
        sa.Column("team_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("token", sa.Text, nullable=False),
        sa.Column("size_mb", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.UniqueConstraint("team_id", "name", name="uq_volumes_team_name"),
    )
    sa.Table(
        "volume_mounts", md,
        sa.Column("sandbox_id", sa.String(64), primary_key=True),
        sa.Column("path", sa.String(4096), primary_key=True),
        sa.Column("volume_id", sa.String(64), nullable=False, index=True),
        sa.Column("team_id", sa.String(64), nullable=False),
    )
    md.create_all(conn)
