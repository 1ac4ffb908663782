"""The store's tests run on both engines: ``database_url`` is an empty database, a SQLite
file in the test's temporary directory or a fresh database in the session's PostgreSQL
cluster (:mod:`postgres_cluster`, started once, on first use)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# tests/ is on the path (pytest puts the directory of its conftest.py there).
from postgres_cluster import Cluster, missing_reason, running_cluster

ENGINES = ("sqlite", "postgresql")


@pytest.fixture(scope="session")
def postgres() -> Iterator[Cluster]:
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    with running_cluster() as cluster:
        yield cluster


@pytest.fixture(params=ENGINES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database on each engine."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'bac.db'}"
    cluster: Cluster = request.getfixturevalue("postgres")
    return cluster.new_database()


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
