"""Version 5: the event log as a trace. Each event carries its sandbox's metadata (copied
at write time, so all sandboxes sharing a value such as ``run_id`` read as one trace),
filled in here for the rows already there; indexes for a sandbox's events in id order and
for pruning by age.

Needs no other step after 4: it adds a column and indexes only.

Frozen: never edit a released step; add a new one instead.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations

from bac_server.store.sealing import Sealer

VERSION = 5


def upgrade(conn: sa.Connection, sealer: Sealer) -> None:
    ops = Operations(MigrationContext.configure(conn))
    ops.add_column("sandbox_events", sa.Column("metadata", sa.JSON, nullable=True))
    md = sa.MetaData()
    sandboxes = sa.Table(
        "sandboxes", md,
        sa.Column("sandbox_id", sa.String(64), primary_key=True),
        sa.Column("metadata", sa.JSON),
    )
    events = sa.Table(
        "sandbox_events", md,
        sa.Column("event_id", sa.Integer, primary_key=True),
        sa.Column("sandbox_id", sa.String(64)),
        sa.Column("metadata", sa.JSON),
    )
    owner = (sa.select(sandboxes.c.metadata)
             .where(sandboxes.c.sandbox_id == events.c.sandbox_id).scalar_subquery())
    conn.execute(sa.update(events).values(metadata=owner))
    ops.create_index("ix_sandbox_events_sandbox", "sandbox_events", ["sandbox_id", "event_id"])
    ops.create_index("ix_sandbox_events_at", "sandbox_events", ["at"])
