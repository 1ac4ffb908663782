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
a freed page. Table ``schema_version`` holds one row per applied step (a database written
before that holds one row, its version, meaning every step up to it); every step not
recorded runs, in order, each in its own transaction with its row, so a crash mid-upgrade
leaves the previous steps intact, and a step numbered below one already applied (added
to the program later) still runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.base import StoreError
from bac_server.store.sealing import Sealer
from bac_server.store.sql.migrations import (
    m0001_initial,
    m0002_checkpoints,
    m0003_templates,
    m0004_sealed_secrets,
    m0005_event_trace,
    m0006_webhooks,
    m0007_usage,
    m0008_usage_cpu_mark,
    m0009_sandbox_key_name,
    m0010_wide_ids,
    m0011_artefacts,
    m0012_volumes,
    m0013_secrets,
    m0014_nodes,
    m0015_sandbox_steps,
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
    _step(m0004_sealed_secrets), _step(m0005_event_trace),
    _step(m0006_webhooks), _step(m0007_usage), _step(m0008_usage_cpu_mark),
    _step(m0009_sandbox_key_name), _step(m0010_wide_ids), _step(m0011_artefacts),
    _step(m0012_volumes),
    _step(m0013_secrets),
    _step(m0014_nodes),
    _step(m0015_sandbox_steps),
)
LATEST = STEPS[-1].version

_version_table = sa.Table(
    "schema_version",
    sa.MetaData(),
    sa.Column("version", sa.Integer, nullable=False),
)


# The migration lock's key on PostgreSQL (any fixed 64-bit number: "bac-migr" in ASCII).
_LOCK_KEY = 0x6261632D6D696772


class MigrationError(StoreError):
    """The database is newer than this program, or a step failed."""


def _applied(conn: sa.Connection) -> set[int]:
    """The steps applied: each recorded version, and every one below the lowest recorded
    (the one row an older runner kept stood for all the steps up to it)."""
    _version_table.create(conn, checkfirst=True)
    rows = {int(v) for v in conn.execute(sa.select(_version_table.c.version)).scalars()}
    if not rows:
        return set()
    return rows | set(range(1, min(rows)))


async def _compact(engine: AsyncEngine) -> None:
    """Rewrite the SQLite file from its live rows and empty the WAL."""
    if engine.dialect.name != "sqlite":
        return
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.exec_driver_sql("VACUUM")
        await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


async def migrate(engine: AsyncEngine, sealer: Sealer) -> int:
    """Apply every step not applied yet; returns the highest version applied before.

    Servers starting together on one PostgreSQL database (replicas, an upgrade rolling
    out) migrate one at a time: each holds a session lock for the whole run, and the next
    finds the steps recorded. On SQLite one process owns the file."""
    async with contextlib.AsyncExitStack() as stack:
        if engine.dialect.name == "postgresql":
            lock = await stack.enter_async_context(engine.connect())
            lock = await lock.execution_options(isolation_level="AUTOCOMMIT")
            await lock.execute(sa.select(sa.func.pg_advisory_lock(_LOCK_KEY)))
            stack.push_async_callback(
                lock.execute, sa.select(sa.func.pg_advisory_unlock(_LOCK_KEY)))
        return await _migrate(engine, sealer)


async def _migrate(engine: AsyncEngine, sealer: Sealer) -> int:
    async with engine.begin() as conn:
        applied = await conn.run_sync(_applied)
    before = max(applied, default=0)
    if before > LATEST:
        raise MigrationError(
            f"database schema version {before} is newer than this server ({LATEST})"
        )
    compact = False
    for step in STEPS:
        if step.version in applied:
            continue
        async with engine.begin() as conn:
            await conn.run_sync(step.upgrade, sealer)
            await conn.execute(sa.insert(_version_table).values(version=step.version))
        compact = compact or step.compact
    if compact and before > 0:  # a new database has nothing to scrub
        await _compact(engine)
    return before
