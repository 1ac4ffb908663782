"""E2B's ``Secret`` API through the official SDK (sync and async) against a real server:
write-only values, versions, list paging, exists, destroy, 404s and bad names."""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import pytest
from e2b import AsyncSecret, Secret
from e2b.exceptions import SecretException, SecretNotFoundException


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_secret_lifecycle_sync_never_returns_the_value(server: object) -> None:
    """create/get_info/update/exists/destroy work unchanged; no answer carries the value."""
    name = _name("sync")
    value = "sk-" + uuid.uuid4().hex
    info = Secret.create(name, value, metadata={"owner": "tests"})
    assert (info.name, info.version, info.metadata) == (name, 1, {"owner": "tests"})
    assert Secret.exists(name) and Secret.exists(info.secret_id)
    by_id = Secret.get_info(info.secret_id)
    assert (by_id.name, by_id.version) == (name, 1)

    updated = Secret.update(name, value + "-2")
    assert (updated.secret_id, updated.version, updated.metadata) == \
        (info.secret_id, 2, {"owner": "tests"})
    replaced = Secret.update(info.secret_id, value + "-3", metadata={"k": "v"})
    assert (replaced.version, replaced.metadata) == (3, {"k": "v"})

    # Every read surface, raw: no value anywhere.
    url, key = server.url, server.keys[0]  # type: ignore[attr-defined]
    with httpx.Client(base_url=url, headers={"X-API-KEY": key}) as raw:
        texts = [raw.get("/secrets").text, raw.get(f"/secrets/{name}").text]
    assert not any(value in t for t in texts)
    assert set(json.loads(texts[1])) == {"secretID", "name", "currentVersion", "metadata",
                                          "createdAt", "updatedAt"}

    assert Secret.destroy(name) is True
    assert Secret.destroy(name) is False
    assert Secret.exists(name) is False
    with pytest.raises(SecretNotFoundException):
        Secret.get_info(name)
    with pytest.raises(SecretNotFoundException):
        Secret.update(name, "x")


def test_secret_names_conflicts_and_other_teams(server: object) -> None:
    """A name is unique per team (409), bad names and empty values are 400, and another
    team sees none of them."""
    name = _name("dup")
    Secret.create(name, "one")
    try:
        with pytest.raises(SecretException, match="409"):
            Secret.create(name, "two")
        for bad in ("has space", "a/b", "x$y", "", "9b2f7c9e-1a6b-4c1f-8d2a-3f4e5a6b7c8d"):
            with pytest.raises(SecretException, match="400"):
                Secret.create(bad, "v")
        with pytest.raises(SecretException, match="400"):
            Secret.create(_name("empty"), "")
        other = server.keys[1]  # type: ignore[attr-defined]
        assert Secret.exists(name, api_key=other) is False
        assert Secret.destroy(name, api_key=other) is False
        assert Secret.fill(name) == "${e2b.secrets." + name + "}"
    finally:
        Secret.destroy(name)


def test_secret_list_pages_with_next_token(server: object) -> None:
    """list(limit) pages oldest first through X-Next-Token until has_next is False."""
    key = server.keys[1]  # type: ignore[attr-defined]  # a team of its own here
    names = [_name(f"page{i}") for i in range(5)]
    for name in names:
        Secret.create(name, "v", api_key=key)
    try:
        paginator = Secret.list(limit=2, api_key=key)
        seen: list[str] = []
        pages = 0
        while paginator.has_next:
            seen += [s.name for s in paginator.next_items()]
            pages += 1
        assert [n for n in seen if n in names] == names
        assert pages == 3
    finally:
        for name in names:
            Secret.destroy(name, api_key=key)


def test_secret_lifecycle_async() -> None:
    """The async twin: create, update, get_info, list, exists, destroy."""

    async def main() -> None:
        name = _name("async")
        info = await AsyncSecret.create(name, "value-1")
        assert info.version == 1
        assert (await AsyncSecret.update(name, "value-2")).version == 2
        assert (await AsyncSecret.get_info(info.secret_id)).name == name
        paginator = AsyncSecret.list(limit=100)
        listed = await paginator.next_items()
        assert name in [s.name for s in listed]
        assert await AsyncSecret.exists(name)
        assert await AsyncSecret.destroy(info.secret_id)
        assert not await AsyncSecret.exists(name)
        with pytest.raises(SecretNotFoundException):
            await AsyncSecret.get_info(name)

    asyncio.run(main())
