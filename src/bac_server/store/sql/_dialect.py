"""What SQLite and PostgreSQL do differently, in the one place the store's classes ask.

**Inserts that meet an existing key** (:func:`insert`): both engines have ``INSERT … ON
CONFLICT``, spelt through each dialect's own ``insert`` construct; an upsert is one
statement, so two writers of the same key never fail on each other.

**Serialised sections** (:func:`serialize`). SQLite has one writer: a transaction that
has written holds the whole database until it commits, so a write followed by reads and
more writes never interleaves with another such transaction. PostgreSQL runs
transactions side by side (``READ COMMITTED``), so where the store's correctness rests
on not interleaving, the transaction takes a transaction-scoped advisory lock named by
what it guards (a table, a team's rows, a template's tags), released when it commits or
rolls back. Two of them matter beyond a single row:

- *Ids in commit order.* Readers follow the event log (and a webhook's deliveries) by
  id: "everything after the last id I saw". A sequence hands out ids when rows are
  inserted, not when they commit, so without the lock a transaction holding id 5 can
  commit after one holding id 6 was read, and a follower past 6 never sees 5. Inserts
  into those tables take the table's lock first: ids are then given out in the order
  their transactions commit (a commit is visible before its locks are released).
- *Check, then write.* A bound per team (webhooks, cost caps) is counted in the same
  transaction that inserts, under the team's lock; a tag moved to a finished build is
  read and rewritten under the template's lock.

On SQLite :func:`serialize` does nothing: the caller's transaction must already hold the
write lock, i.e. have written before it reads what it depends on.

**Free text** (:func:`free_text`): PostgreSQL's text holds no NUL character, SQLite's
does. Text the store is handed from outside (an event's message, a build's output and
failure, a receiver's error) has any NUL replaced by U+FFFD on both engines, so a
build printing binary output is logged alike on either. (JSON columns keep NUL escaped
as ``\\u0000`` on both.)
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine


def free_text(value: str) -> str:
    """``value`` storable on every engine (no NUL; see above)."""
    return value.replace("\x00", "\ufffd")


def insert(conn: AsyncConnection, table: sa.Table) -> Any:
    """The dialect's ``INSERT`` with ``on_conflict_do_nothing`` and ``on_conflict_do_update``."""
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


async def serialize(conn: AsyncConnection, *name: str) -> None:
    """Hold the lock ``name`` until this transaction ends (PostgreSQL; see above)."""
    if conn.dialect.name != "postgresql":
        return
    # A 64-bit hash of the name keys the lock: a collision only serialises two sections
    # that need not be, never lets two that must not interleave run together.
    key = sa.func.hashtextextended(":".join(name), 0)
    await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(key)))


async def insert_bounded(engine: AsyncEngine, statement: sa.Insert, table: sa.Table,
                          team_id: str, bound: int) -> bool:
    """Insert one row of a team's unless the team already has ``bound`` of them in
    ``table``: inserted first, then counted, under the team's lock (on SQLite the
    insert holds the writer), so concurrent inserts never pass the bound together."""
    async with engine.connect() as conn:
        async with conn.begin() as transaction:
            await serialize(conn, table.name, team_id)
            await conn.execute(statement)
            count = (await conn.execute(sa.select(sa.func.count()).select_from(table)
                                        .where(table.c.team_id == team_id))).scalar_one()
            if count > bound:
                await transaction.rollback()
                return False
    return True
