"""Version 11: artefacts promoted out of sandboxes, one row per (team, run, name) (the
primary key, which makes concurrent identical promotions one row), indexed by blob and by
age (retention).

Needs no other step after 10: it only adds a table.

Frozen: never edit a released step; add a new one instead.
"""

from __future__ import annotations

import sqlalchemy as sa

from bac_server.store.sealing import Sealer

VERSION = 11


def upgrade(conn: sa.Connection, sealer: Sealer) -> None:
    md = sa.MetaData()
    sa.Table(
        "artefacts", md,
        sa.Column("team_id", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.String(255), primary_key=True),
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("sha256", sa.String(64), nullable=False, index=True),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("sandbox_id", sa.String(64), nullable=False),
        sa.Column("source_path", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False, index=True),
    )
    md.create_all(conn)
