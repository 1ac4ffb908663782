"""API keys: issued once, stored hashed, checked, revoked (a real store on each engine)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bac_server.control import InvalidRequest, KeyService, Unauthenticated
from bac_server.control.tokens import hash_api_key
from bac_server.store.sealing import Sealer
from bac_server.store.sql import SqlStore

SEALER = Sealer(Sealer.new_key())  # one key for every store a test reopens


async def test_key_lifecycle(database_url: str, at_rest: Callable[[str], bytes]) -> None:
    """A new key authenticates as its team, is stored only as a hash, and stops at revoke."""
    store = await SqlStore.open(database_url, SEALER)
    keys = KeyService(store.keys)
    key = await keys.create("acme", "ci")
    assert key.startswith("e2b_") and len(key) == 44
    assert (await keys.authenticate(key)).name == "acme"
    raw = at_rest(database_url)
    assert key.encode() not in raw
    assert hash_api_key(key).encode() in raw
    [info] = await keys.list()
    assert (info.team, info.name, info.revoked_at) == ("acme", "ci", None)
    assert await keys.revoke(info.key_id) == 1
    with pytest.raises(Unauthenticated):
        await keys.authenticate(key)
    await store.close()


async def test_missing_and_unknown_keys(database_url: str) -> None:
    """No key and a wrong key are both Unauthenticated, with different messages."""
    store = await SqlStore.open(database_url, SEALER)
    keys = KeyService(store.keys)
    with pytest.raises(Unauthenticated, match="missing"):
        await keys.authenticate(None)
    with pytest.raises(Unauthenticated, match="invalid"):
        await keys.authenticate("e2b_" + "0" * 40)
    with pytest.raises(InvalidRequest, match="team"):
        await keys.create("", "x")
    await store.close()
