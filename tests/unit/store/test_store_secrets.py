"""The SQL store's secrets on each engine: by id or name, per team, versions, paging, and
the value sealed at rest (not in the file, its WAL or a dump), read only by the lookup."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from bac_server.store import SecretRecord, StoreConflict
from bac_server.store.sealing import Sealer, SealError
from bac_server.store.sql import SqlStore

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
SEALER = Sealer(Sealer.new_key())


def _secret(sid: str, name: str, *, team: str = "team", at: datetime = NOW) -> SecretRecord:
    return SecretRecord(secret_id=sid, team_id=team, name=name, version=1, created_at=at,
                        updated_at=at, metadata={"k": "v"})


async def test_secrets_round_trip_versions_and_values_sealed(
        database_url: str, at_rest: Callable[[str], bytes]) -> None:
    """Found by id or name within the team only; a name is one secret per team; an update
    is the next version and replaces the value; the values are in no byte at rest."""
    store = await SqlStore.open(database_url, SEALER)
    try:
        await store.secrets.add_secret(_secret("s1", "openai"), "value-one-AAAA")
        await store.secrets.add_secret(_secret("s2", "openai", team="other"), "value-other")
        with pytest.raises(StoreConflict):
            await store.secrets.add_secret(_secret("s3", "openai"), "x")
        assert (await store.secrets.get_secret("team", "s1")) == \
            (await store.secrets.get_secret("team", "openai")) == _secret("s1", "openai")
        assert await store.secrets.get_secret("other", "s1") is None
        updated = await store.secrets.update_secret("team", "openai", "value-two-BBBB", None,
                                                    NOW + timedelta(1))
        assert updated is not None and (updated.version, updated.metadata) == (2, {"k": "v"})
        assert await store.secrets.update_secret("team", "nope", "x", None, NOW) is None
        assert await store.secrets.secret_values("team", frozenset({"openai", "gone"})) == \
            {"openai": "value-two-BBBB"}
        assert await store.secrets.secret_values("other", frozenset({"openai"})) == \
            {"openai": "value-other"}
        dump = at_rest(database_url)
        assert b"value-one-AAAA" not in dump and b"value-two-BBBB" not in dump
        assert not await store.secrets.delete_secret("other", "s1")
        assert await store.secrets.delete_secret("team", "openai")
        assert await store.secrets.secret_values("team", frozenset({"openai"})) == {}
    finally:
        await store.close()
    other_key = await SqlStore.open(database_url, Sealer(Sealer.new_key()))
    try:
        with pytest.raises(SealError):
            await other_key.secrets.secret_values("other", frozenset({"openai"}))
    finally:
        await other_key.close()


async def test_secrets_page_oldest_first_after_a_token(database_url: str) -> None:
    store = await SqlStore.open(database_url, SEALER)
    try:
        for n in range(5):
            await store.secrets.add_secret(
                _secret(f"s{n}", f"name{n}", at=NOW + timedelta(seconds=n // 2)), "v")
        first = await store.secrets.list_secrets("team", None, 2)
        place = (first[-1].created_at, first[-1].secret_id)
        await store.secrets.delete_secret("team", first[-1].secret_id)  # the place stays
        rest = await store.secrets.list_secrets("team", place, 10)
        assert [s.secret_id for s in first + rest] == [f"s{n}" for n in range(5)]
    finally:
        await store.close()
