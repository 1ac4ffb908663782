"""Version 14: node agents (``nodes``) and what is placed on them (``placements``).

Needs no other step: it only adds tables (an all-in-one server leaves them empty).

Frozen: never edit a released step; add a new one instead.
"""

from __future__ import annotations

import sqlalchemy as sa

from bac_server.store.sealing import Sealer

VERSION = 14


def upgrade(conn: sa.Connection, sealer: Sealer) -> None:
    md = sa.MetaData()
    sa.Table(
        "nodes", md,
        sa.Column("node_id", sa.String(64), primary_key=True),
        sa.Column("address", sa.String(255), nullable=False),
        sa.Column("rpc_port", sa.Integer, nullable=False),
        sa.Column("tunnel_port", sa.Integer, nullable=False),
        sa.Column("vcpus", sa.Integer, nullable=False),
        sa.Column("memory_mb", sa.BigInteger, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("sandboxes", sa.Integer, nullable=False),
    )
    sa.Table(
        "placements", md,
        sa.Column("object_id", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("node_id", sa.String(64), nullable=False, index=True),
        sa.Column("vcpus", sa.Integer, nullable=False),
        sa.Column("memory_mb", sa.BigInteger, nullable=False),
    )
    md.create_all(conn)
