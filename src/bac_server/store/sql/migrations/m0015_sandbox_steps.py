"""Version 15: leases on sandboxes' lifecycle steps (``sandbox_steps``), so that two API
replicas never step on one sandbox at once (docs/scale-out.md).

Needs no other step: it only adds a table (an all-in-one server leaves it empty).

Frozen: never edit a released step; add a new one instead.
"""

from __future__ import annotations

import sqlalchemy as sa

from bac_server.store.sealing import Sealer

VERSION = 15


def upgrade(conn: sa.Connection, sealer: Sealer) -> None:
    md = sa.MetaData()
    sa.Table(
        "sandbox_steps", md,
        sa.Column("sandbox_id", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("until", sa.Float, nullable=False),
    )
    md.create_all(conn)
