"""The store's tests run on both engines: a SQLite file in the test's temporary directory,
or a fresh database in the session's PostgreSQL cluster (:mod:`postgres_cluster`,
started once, on first use). ``empty_database_url`` has no tables yet (migration tests);
``database_url`` has no rows, and on PostgreSQL its tables already: it is cloned from a
database migrated once per session, which spares each test the migration's DDL (the
store's own open then finds every step applied; on SQLite migrating is fast)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# tests/ is on the path (pytest puts the directory of its conftest.py there).
from postgres_cluster import Cluster, missing_reason, running_cluster

from bac_server.store.sealing import Sealer
from bac_server.store.sql.engine import open_engine
from bac_server.store.sql.migrations import migrate

ENGINES = ("sqlite", "postgresql")


@pytest.fixture(scope="session")
def postgres() -> Iterator[Cluster]:
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    with running_cluster() as cluster:
        yield cluster


_MIGRATED = "migrated"


@pytest.fixture(scope="session")
def migrated_template(postgres: Cluster) -> str:
    """The name of a database at the latest schema with no rows, to clone."""
    url = postgres.new_database(_MIGRATED, numbered=False)

    async def run() -> None:
        engine = open_engine(url)
        try:
            # Migrations seal nothing in an empty database: any key does.
            await migrate(engine, Sealer(Sealer.new_key()))
        finally:
            await engine.dispose()  # a template database takes no open connection

    # Its own thread and loop: the session's loop may be running this fixture.
    thread = threading.Thread(target=asyncio.run, args=(run(),))
    thread.start()
    thread.join()
    return _MIGRATED


@pytest.fixture(params=ENGINES)
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database without tables on each engine."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'bac.db'}"
    cluster: Cluster = request.getfixturevalue("postgres")
    return cluster.new_database()


@pytest.fixture(params=ENGINES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database without rows on each engine."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'bac.db'}"
    cluster: Cluster = request.getfixturevalue("postgres")
    return cluster.new_database(template=request.getfixturevalue("migrated_template"))


@pytest.fixture
def at_rest(request: pytest.FixtureRequest) -> Callable[[str], bytes]:
    """What a copy of the database at a URL holds: SQLite's file and its WAL, or a
    PostgreSQL dump."""

    def read(url: str) -> bytes:
        if url.startswith("sqlite"):
            db = Path(url.split(":///", 1)[1])
            return b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists())
        cluster: Cluster = request.getfixturevalue("postgres")
        return cluster.dump(url)

    return read
