"""A statement whose caller is cancelled ends in the caller's cancellation, on both
engines: never a StoreUnavailable (a task told to stop would take it for an outage, try
again, and hold the server's shutdown), and the engine serves the next statement."""

from __future__ import annotations

import asyncio
import time

import pytest
import sqlalchemy as sa

from bac_server.store.sql.engine import open_engine

_SLEEP = {"sqlite": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                    "WHERE i < 100000000) SELECT count(*) FROM n",
          "postgresql": "SELECT pg_sleep(30)"}


async def test_a_cancelled_statement_is_the_callers_cancellation(database_url: str) -> None:
    engine = open_engine(database_url)
    kind = "postgresql" if database_url.startswith("postgresql") else "sqlite"
    started = asyncio.Event()

    async def long_statement() -> None:
        async with engine.connect() as conn:
            started.set()
            await conn.execute(sa.text(_SLEEP[kind]))

    try:
        task = asyncio.create_task(long_statement())
        await started.wait()
        if kind == "postgresql":  # the statement is running in the server
            async with engine.connect() as watcher:
                deadline = time.monotonic() + 10
                while not (await watcher.execute(sa.text(
                        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE "
                        "'SELECT pg_sleep%' AND state = 'active'"))).scalar():
                    assert time.monotonic() < deadline, "the statement never started"
                    await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        async with engine.connect() as conn:  # the next statement is served
            assert (await conn.execute(sa.text("SELECT 1"))).scalar() == 1
    finally:
        await engine.dispose()
