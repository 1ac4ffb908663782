"""Version 13: a team's secrets (E2B's ``Secret``), unique per (team, name); ``value`` is
sealed (``store.sealing``, associated data ``secrets.value:<id>:<version>``).

Needs no other step: it only adds a table.

Frozen: never edit a released step; add a new one instead.
"""

from __future__ import annotations

import sqlalchemy as sa

from bac_server.store.sealing import Sealer

VERSION = 13


def upgrade(conn: sa.Connection, sealer: Sealer) -> None:
    md = sa.MetaData()
    sa.Table(
        "secrets", md,
        sa.Column("secret_id", sa.String(64), primary_key=True),
        sa.Column("team_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("metadata", sa.Text, nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.UniqueConstraint("team_id", "name", name="uq_secrets_team_name"),
        sa.Index("ix_secrets_team_created", "team_id", "created_at"),
    )
    md.create_all(conn)
