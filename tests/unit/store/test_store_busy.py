"""SQLite's write lock held by another writer past the busy timeout: the store says the
database is busy (StoreUnavailable, which the API answers 503: worth a retry), never an
engine error the API would have to answer 500."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

from bac_server.store import StoreUnavailable
from bac_server.store.sql import engine as sql_engine


async def test_a_write_lock_held_too_long_is_unavailable(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sql_engine, "BUSY_TIMEOUT_MS", 100)
    path = tmp_path / "bac.db"
    engine = sql_engine.open_engine(f"sqlite+aiosqlite:///{path}")
    try:
        async with engine.begin() as conn:
            await conn.execute(sa.text("CREATE TABLE t (x INTEGER)"))
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")  # the write lock, kept
            with pytest.raises(StoreUnavailable, match="busy"):
                async with engine.begin() as conn:
                    await conn.execute(sa.text("INSERT INTO t VALUES (1)"))
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        async with engine.begin() as conn:  # free again: writes go through
            await conn.execute(sa.text("INSERT INTO t VALUES (2)"))
    finally:
        await engine.dispose()
