"""Version 6: webhooks, the deliveries owed to them and the deliverer's cursor; the event
log's ``wire_type`` (the event's type on the events API and webhooks), filled in for the
rows already there, and an index by team, for ``GET /events/sandboxes``.

Needs no step after 4: it only adds tables, a column and an index, so it applies whether
or not version 5 ran before it (the runner applies every step not yet recorded, in order).

Frozen: never edit a released step; add a new one instead.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations

from bac_server.store.sealing import Sealer

VERSION = 6

# The types of the kinds logged before this version (frozen here as they were then).
_TYPES = {
    "created": "sandbox.lifecycle.created",
    "timeout_set": "sandbox.lifecycle.updated",
    "connected": "sandbox.lifecycle.updated",
    "network_updated": "sandbox.lifecycle.updated",
    "killed": "sandbox.lifecycle.killed",
    "died": "sandbox.lifecycle.killed",
    "paused": "sandbox.lifecycle.paused",
    "resumed": "sandbox.lifecycle.resumed",
    "checkpointed": "sandbox.lifecycle.checkpointed",
    "snapshot_taken": "sandbox.lifecycle.checkpointed",
}


def upgrade(conn: sa.Connection, sealer: Sealer) -> None:
    md = sa.MetaData()
    sa.Table(
        "webhooks", md,
        sa.Column("webhook_id", sa.String(64), primary_key=True),
        sa.Column("team_id", sa.String(64), nullable=False, index=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("events", sa.JSON, nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("secret", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    sa.Table(
        "webhook_deliveries", md,
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("delivery_id", sa.String(64), nullable=False, unique=True),
        sa.Column("webhook_id", sa.String(64), nullable=False),
        sa.Column("team_id", sa.String(64), nullable=False),
        sa.Column("event_id", sa.Integer, nullable=False),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("next_attempt_at", sa.Float, nullable=False),
        sa.Column("last_attempt_at", sa.Float, nullable=True),
        sa.Column("delivered_at", sa.Float, nullable=True),
        sa.Column("response_code", sa.Integer, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("duration_ms", sa.Integer, nullable=True),
        sa.UniqueConstraint("webhook_id", "event_id", name="uq_webhook_deliveries_event"),
        sa.Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),
        sa.Index("ix_webhook_deliveries_webhook", "webhook_id", "seq"),
    )
    sa.Table(
        "webhook_cursor", md,
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("value", sa.Integer, nullable=False),
    )
    md.create_all(conn)
    Operations(MigrationContext.configure(conn)).add_column(
        "sandbox_events", sa.Column("wire_type", sa.String(64), nullable=True))
    events = sa.Table("sandbox_events", sa.MetaData(),
                      sa.Column("event_id", sa.Integer, primary_key=True),
                      sa.Column("team_id", sa.String(64)),
                      sa.Column("kind", sa.String(32)),
                      sa.Column("fields", sa.JSON),
                      sa.Column("wire_type", sa.String(64)))
    for kind, wire in _TYPES.items():
        conn.execute(sa.update(events).where(events.c.kind == kind).values(wire_type=wire))
    # A timeout either killed the sandbox or paused it (autoPause: its fields say how).
    for row in conn.execute(sa.select(events.c.event_id, events.c.fields)
                            .where(events.c.kind == "timeout")).all():
        paused = "mode" in dict(row.fields or {})
        conn.execute(sa.update(events).where(events.c.event_id == row.event_id).values(
            wire_type=_TYPES["paused" if paused else "killed"]))
    # Version 5 makes the same index: whichever runs first makes it.
    existing = {i["name"] for i in sa.inspect(conn).get_indexes("sandbox_events")}
    if "ix_sandbox_events_team" not in existing:
        sa.Index("ix_sandbox_events_team", events.c.team_id, events.c.event_id).create(conn)
