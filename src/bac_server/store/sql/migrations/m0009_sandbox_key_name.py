"""Version 9: each sandbox keeps the name of the API key that created it (``key_name``;
NULL for sandboxes made before), which Mission Control's fleet shows.

Needs no other step after 8: it adds a nullable column only.

Frozen: never edit a released step; add a new one instead.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations

from bac_server.store.sealing import Sealer

VERSION = 9


def upgrade(conn: sa.Connection, sealer: Sealer) -> None:
    ops = Operations(MigrationContext.configure(conn))
    ops.add_column("sandboxes", sa.Column("key_name", sa.String(255), nullable=True))
