"""Version 8: each usage row keeps the sandbox's CPU counter as it was read when the row
was last metered (``cpu_mark``, seconds; NULL where it was not read), so a restarted
server charges the CPU a sandbox used while the server was down, as it already charges
the time.

Needs no other step after 7: it adds a nullable column only.

Frozen: never edit a released step; add a new one instead.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations

from bac_server.store.sealing import Sealer

VERSION = 8


def upgrade(conn: sa.Connection, sealer: Sealer) -> None:
    ops = Operations(MigrationContext.configure(conn))
    ops.add_column("usage_days", sa.Column("cpu_mark", sa.Float, nullable=True))
