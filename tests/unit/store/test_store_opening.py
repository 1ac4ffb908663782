"""Opening the store on a database URL it cannot use: a URL of another engine or driver,
a database that cannot be reached or refuses the server; each one line naming the URL
(its password hidden) and why, before anything is written."""

from __future__ import annotations

import pytest
from postgres_cluster import Cluster

from bac_server.store import StoreError, StoreUnavailable
from bac_server.store.sealing import Sealer
from bac_server.store.sql import SqlStore
from bac_server.store.sql.migrations import MigrationError

SEALER = Sealer(Sealer.new_key())


@pytest.mark.parametrize("url, says", [
    ("postgresql://bac:pw@db.example/bac", "names the driver 'postgresql': use "
                                           "postgresql+asyncpg://"),
    ("postgres://bac@db.example/bac", "names the driver 'postgres': use postgresql+asyncpg://"),
    ("mysql+aiomysql://bac@db.example/bac", "the store runs on postgresql+asyncpg:// or "
                                            "sqlite+aiosqlite:///"),
    ("sqlite:///bac.db", "names the driver 'sqlite'"),
    ("bac.db", "is not a URL such as"),
])
async def test_a_url_of_another_kind_is_refused(url: str, says: str) -> None:
    with pytest.raises(StoreError, match=r"^the database URL ") as refused:
        await SqlStore.open(url, SEALER)
    assert says in str(refused.value) and "\n" not in str(refused.value)
    assert "pw" not in str(refused.value)


async def test_an_unreachable_or_refusing_database_is_one_line(postgres: Cluster) -> None:
    socket = postgres.socket_dir
    for url, says in (
        ("postgresql+asyncpg://bac:secret@127.0.0.1:1/bac", "Connect call failed"),
        (f"postgresql+asyncpg://bac_test@/nowhere?host={socket}",
         'database "nowhere" does not exist'),
        (f"postgresql+asyncpg://bac_test@/bac?host={socket}-gone", "No such file"),
        (f"postgresql+asyncpg://bac_test@/postgres?host={socket}&sslmode=require",
         "unexpected keyword argument 'sslmode'"),
    ):
        with pytest.raises(StoreUnavailable) as refused:
            await SqlStore.open(url, SEALER)
        message = str(refused.value)
        assert message.startswith("cannot use the database postgresql+asyncpg://")
        assert says in message and "\n" not in message and "secret" not in message


async def test_a_newer_database_is_a_store_error(database_url: str) -> None:
    """What the CLI and bac serve print as one line (they catch StoreError)."""
    store = await SqlStore.open(database_url, SEALER)
    await store.close()
    from bac_server.store.sql.engine import open_engine

    engine = open_engine(database_url)
    async with engine.begin() as conn:
        await conn.exec_driver_sql("INSERT INTO schema_version VALUES (999)")
    await engine.dispose()
    with pytest.raises(MigrationError, match="newer than this server") as refused:
        await SqlStore.open(database_url, SEALER)
    assert isinstance(refused.value, StoreError)
