"""Version 4: sandboxes' env vars and access tokens sealed (``store.sealing``), in the
sandboxes and checkpoints tables; rows written in clear by older servers are sealed here.

The columns keep their names and types: a sealed value is text (a JSON string in the
``env_vars`` columns). The runner compacts the database after this step, so no freed
page or old WAL frame keeps a value in clear.

Frozen: never edit a released step; add a new one instead.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from bac_server.store.sealing import Sealer, is_sealed

VERSION = 4
COMPACT = True

_md = sa.MetaData()
_sandboxes = sa.Table(
    "sandboxes", _md,
    sa.Column("sandbox_id", sa.String(64), primary_key=True),
    sa.Column("envd_access_token", sa.String(128)),
    sa.Column("traffic_access_token", sa.String(128)),
    sa.Column("env_vars", sa.JSON),
)
_checkpoints = sa.Table(
    "checkpoints", _md,
    sa.Column("checkpoint_id", sa.String(64), primary_key=True),
    sa.Column("envd_access_token", sa.String(128)),
    sa.Column("env_vars", sa.JSON),
)


def _sealed(sealer: Sealer, table: str, column: str, key: str, value: Any) -> Any:
    if value is None or is_sealed(value):
        return value
    where = f"{table}.{column}:{key}"
    if column == "env_vars":
        return sealer.seal_map({str(k): str(v) for k, v in dict(value).items()}, where)
    return sealer.seal(str(value), where)


def _seal_table(conn: sa.Connection, sealer: Sealer, table: sa.Table) -> None:
    key_column = table.primary_key.columns.values()[0]
    columns = [c for c in table.columns if c is not key_column]
    for row in conn.execute(sa.select(table)).all():
        key = getattr(row, key_column.name)
        values = {c.name: _sealed(sealer, table.name, c.name, key, getattr(row, c.name))
                  for c in columns}
        if any(values[c.name] != getattr(row, c.name) for c in columns):
            conn.execute(sa.update(table).where(key_column == key).values(**values))


def upgrade(conn: sa.Connection, sealer: Sealer) -> None:
    _seal_table(conn, sealer, _sandboxes)
    _seal_table(conn, sealer, _checkpoints)
