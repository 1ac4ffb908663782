"""The SQL store's artefacts on each engine."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

from bac_server.store import ArtefactKind, ArtefactRecord
from bac_server.store.sealing import Sealer
from bac_server.store.sql import SqlStore

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
SEALER = Sealer(Sealer.new_key())


def _artefact(name: str, *, team: str = "team", run: str = "run-1", sha: str = "a" * 64,
              size: int = 10, at: datetime = NOW) -> ArtefactRecord:
    return ArtefactRecord(team_id=team, run_id=run, name=name, sha256=sha, size_bytes=size,
                          kind=ArtefactKind.FILE, sandbox_id="sbx", source_path="/tmp/x",
                          created_at=at)


async def test_artefacts_round_trip_list_sum_age_and_delete(database_url: str) -> None:
    """Artefacts come back as stored, per team and run, oldest first; bytes add up per
    team; retention finds the old ones; a blob is in use while a row names it."""
    store = await SqlStore.open(database_url, SEALER)
    try:
        first = _artefact("out.txt")
        assert await store.artefacts.add_artefact(first) == first
        second = _artefact("dir", sha="b" * 64, size=20, at=NOW + timedelta(seconds=1))
        await store.artefacts.add_artefact(dataclasses.replace(second,
                                                               kind=ArtefactKind.DIRECTORY))
        await store.artefacts.add_artefact(_artefact("out.txt", team="other", size=1000))
        await store.artefacts.add_artefact(_artefact("out.txt", run="run-2", size=5))
        assert await store.artefacts.get_artefact("team", "run-1", "out.txt") == first
        listed = await store.artefacts.list_artefacts("team", "run-1")
        assert [(a.name, a.kind) for a in listed] == [("out.txt", ArtefactKind.FILE),
                                                      ("dir", ArtefactKind.DIRECTORY)]
        assert await store.artefacts.artefact_bytes("team") == 35
        old = await store.artefacts.artefacts_before(NOW + timedelta(milliseconds=500), 10)
        assert sorted((a.team_id, a.run_id) for a in old) == [
            ("other", "run-1"), ("team", "run-1"), ("team", "run-2")]
        assert await store.artefacts.blob_in_use("b" * 64)
        assert await store.artefacts.delete_artefact("team", "run-1", "dir") is True
        assert await store.artefacts.delete_artefact("team", "run-1", "dir") is False
        assert not await store.artefacts.blob_in_use("b" * 64)
        assert await store.artefacts.get_artefact("team", "run-1", "dir") is None
    finally:
        await store.close()


async def test_a_name_taken_returns_the_row_already_there(database_url: str) -> None:
    """Inserting under a (team, run, name) that exists keeps the first row and returns
    it, also when many inserts race: one row, the same one for every caller."""
    store = await SqlStore.open(database_url, SEALER)
    try:
        tries = [_artefact("x", sha=f"{i:064x}", at=NOW + timedelta(seconds=i))
                 for i in range(8)]
        found = await asyncio.gather(*(store.artefacts.add_artefact(a) for a in tries))
        assert len({f.sha256 for f in found}) == 1
        assert await store.artefacts.list_artefacts("team", "run-1") == [found[0]]
    finally:
        await store.close()


async def test_the_teams_byte_bound_holds_for_inserts_at_once(database_url: str) -> None:
    """With a bound of 35 bytes, eight 10-byte artefacts inserted at once: three are
    kept, the others refused (None) and not inserted; another team is not counted."""
    store = await SqlStore.open(database_url, SEALER)
    try:
        await store.artefacts.add_artefact(_artefact("theirs", team="other", size=1000))
        found = await asyncio.gather(*(
            store.artefacts.add_artefact(_artefact(f"a{i}", sha=f"{i:064x}", size=10),
                                         max_team_bytes=35) for i in range(8)))
        kept = [f for f in found if f is not None]
        assert len(kept) == 3
        assert sorted(a.name for a in await store.artefacts.list_artefacts("team", "run-1")) \
            == sorted(a.name for a in kept)
        assert await store.artefacts.artefact_bytes("team") == 30
    finally:
        await store.close()
