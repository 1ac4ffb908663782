"""Versioned schema migrations, applied in order at start-up by :func:`migrate`.

Why a small runner and not Alembic: the server migrates its own embedded database at every
start, inside the async engine, with no ini file, ``env.py`` or script directory to ship and
configure per deployment; Alembic's strengths (autogenerate, branches, a CLI for operators)
buy nothing for a schema this size owned by one program. Each step is a frozen module
``mNNNN_<what>.py`` with ``VERSION`` and ``upgrade(conn)`` written with SQLAlchemy Core DDL,
so the same steps run on SQLite and PostgreSQL; a step that needs ``ALTER`` on SQLite can use
``alembic.operations.Operations`` on the connection it is given. From version 4 on a step is
``upgrade(conn, sealer)``: it may seal values (``store.sealing``); one that sets ``COMPACT``
is followed by a ``VACUUM`` and a truncated WAL on SQLite, so nothing it replaced stays in
a freed page. The applied version lives in table ``schema_version``; every step runs in
its own transaction, so a crash mid-upgrade leaves the previous version intact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.sealing import Sealer
from bac_server.store.sql.migrations import (
    m0001_initial,
    m0002_checkpoints,
    m0003_templates,
    m0004_sealed_secrets,
)


@dataclass(frozen=True)
class Step:
    version: int
    upgrade: Callable[[sa.Connection, Sealer], None]
    compact: bool = False


def _unsealed(module: ModuleType) -> Step:
    """A step from before sealing: ``upgrade(conn)``."""
    return Step(module.VERSION, lambda conn, _sealer: module.upgrade(conn))


def _step(module: ModuleType) -> Step:
    return Step(module.VERSION, module.upgrade, getattr(module, "COMPACT", False))


STEPS: tuple[Step, ...] = (
    _unsealed(m0001_initial), _unsealed(m0002_checkpoints), _unsealed(m0003_templates),
    _step(m0004_sealed_secrets),
)
LATEST = STEPS[-1].version

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


async def _compact(engine: AsyncEngine) -> None:
    """Rewrite the SQLite file from its live rows and empty the WAL."""
    if engine.dialect.name != "sqlite":
        return
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.exec_driver_sql("VACUUM")
        await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


async def migrate(engine: AsyncEngine, sealer: Sealer) -> int:
    """Bring the database to :data:`LATEST`; returns the version it was at before."""
    async with engine.begin() as conn:
        before = await conn.run_sync(_current)
    if before > LATEST:
        raise MigrationError(
            f"database schema version {before} is newer than this server ({LATEST})"
        )
    compact = False
    for step in STEPS:
        if step.version <= before:
            continue
        async with engine.begin() as conn:
            await conn.run_sync(step.upgrade, sealer)
            await conn.execute(sa.delete(_version_table))
            await conn.execute(sa.insert(_version_table).values(version=step.version))
        compact = compact or step.compact
    if compact and before > 0:  # a new database has nothing to scrub
        await _compact(engine)
    return before
