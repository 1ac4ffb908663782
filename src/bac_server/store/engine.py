"""Open the database engine: SQLite in WAL mode by default, any SQLAlchemy async URL otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


def open_engine(url: str) -> AsyncEngine:
    """Create the engine; for SQLite, make the file's directory and set the pragmas."""
    parsed = sa.make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_async_engine(url, pool_pre_ping=True)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_async_engine(url)
    sa.event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL: readers never block the writer, and a crash (kill -9) loses no committed row.
    # synchronous=NORMAL is durable against process crashes in WAL mode; only a power
    # loss can drop the last transactions, which reconciliation at start-up repairs.
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()
