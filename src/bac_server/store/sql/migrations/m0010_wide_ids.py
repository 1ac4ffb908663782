"""Version 10: the ids that only grow (the event log's, the resource samples', the
deliveries' and the event ids they and the deliverer's cursor name) are 64-bit on
PostgreSQL, whose ``SERIAL`` made them 32-bit: a busy server's samples would run out of
2³¹ within months. SQLite's integers are 64-bit already: nothing to do there.

Needs no other step after 9: it changes column types only.

Frozen: never edit a released step; add a new one instead.
"""

from __future__ import annotations

import sqlalchemy as sa

from bac_server.store.sealing import Sealer

VERSION = 10

# (table, column, fed by a sequence)
_COLUMNS = (
    ("sandbox_events", "event_id", True),
    ("sandbox_metrics", "sample_id", True),
    ("webhook_deliveries", "seq", True),
    ("webhook_deliveries", "event_id", False),
    ("webhook_cursor", "value", False),
)


def upgrade(conn: sa.Connection, sealer: Sealer) -> None:
    if conn.dialect.name != "postgresql":
        return
    for table, column, serial in _COLUMNS:
        conn.exec_driver_sql(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE BIGINT")
        if serial:
            sequence = conn.execute(sa.select(sa.func.pg_get_serial_sequence(
                table, column))).scalar_one()
            conn.exec_driver_sql(f"ALTER SEQUENCE {sequence} AS BIGINT")
