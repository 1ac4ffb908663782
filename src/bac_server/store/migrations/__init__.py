"""Versioned schema migrations, applied in order at start-up by :func:`migrate`.

Why a small runner and not Alembic: the server migrates its own embedded database at every
start, inside the async engine, with no ini file, ``env.py`` or script directory to ship and
configure per deployment; Alembic's strengths (autogenerate, branches, a CLI for operators)
buy nothing for a schema this size owned by one program. Each step is a frozen module
``mNNNN_<what>.py`` with ``VERSION`` and ``upgrade(conn)`` written with SQLAlchemy Core DDL,
so the same steps run on SQLite and PostgreSQL; a step that needs ``ALTER`` on SQLite can use
``alembic.operations.Operations`` on the connection it is given. The applied version lives in
table ``schema_version``; every step runs in its own transaction, so a crash mid-upgrade
leaves the previous version intact.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.migrations import m0001_initial, m0002_checkpoints, m0003_templates

Step = tuple[int, Callable[[sa.Connection], None]]

_MODULES: tuple[ModuleType, ...] = (m0001_initial, m0002_checkpoints, m0003_templates)
STEPS: tuple[Step, ...] = tuple((m.VERSION, m.upgrade) for m in _MODULES)
LATEST = STEPS[-1][0]

_version_table = sa.Table(
    "schema_version",
    sa.MetaData(),
    sa.Column("version", sa.Integer, nullable=False),
)


class MigrationError(RuntimeError):
    """The database is newer than this program, or a step failed."""


def _current(conn: sa.Connection) -> int:
    _version_table.create(conn, checkfirst=True)
    row = conn.execute(sa.select(sa.func.max(_version_table.c.version))).scalar()
    return int(row or 0)


async def migrate(engine: AsyncEngine) -> int:
    """Bring the database to :data:`LATEST`; returns the version it was at before."""
    async with engine.begin() as conn:
        before = await conn.run_sync(_current)
    if before > LATEST:
        raise MigrationError(
            f"database schema version {before} is newer than this server ({LATEST})"
        )
    for version, upgrade in STEPS:
        if version <= before:
            continue
        async with engine.begin() as conn:
            await conn.run_sync(upgrade)
            await conn.execute(sa.delete(_version_table))
            await conn.execute(sa.insert(_version_table).values(version=version))
    return before
