"""Artefacts' retention and start-up sweep on a real SQLite store and real blob files:
expired rows go with their bytes unless another row still names them, and what a crash
left (partial writes, blobs no row names) is removed at start."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from bac_server.control import ManualClock, Registry
from bac_server.control.artefacts import Artefacts, ArtefactSettings, Blobs
from bac_server.store import ArtefactKind, ArtefactRecord
from bac_server.store.sealing import Sealer
from bac_server.store.sql import SqlStore

NOW = datetime(2026, 3, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def _record(name: str, sha: str, at: datetime, run: str = "run") -> ArtefactRecord:
    return ArtefactRecord(team_id="team", run_id=run, name=name, sha256=sha, size_bytes=3,
                          kind=ArtefactKind.FILE, sandbox_id="sbx", source_path="/x",
                          created_at=at)


async def test_retention_and_the_start_sweep(tmp_path: Path) -> None:
    """Rows older than the retention go; a blob goes with its last row, not before; at
    start partial writes and unnamed blobs are removed, named ones kept."""
    store = await SqlStore.open(f"sqlite+aiosqlite:///{tmp_path / 'bac.db'}",
                                Sealer(Sealer.new_key()))
    blobs = Blobs(tmp_path / "artefacts")
    service = Artefacts(artefact_store=store.artefacts, sandbox_store=store.sandboxes,
                        registry=Registry(ManualClock()), blobs=blobs,
                        settings=ArtefactSettings(retention_s=7 * 86_400),
                        now=lambda: NOW)
    try:
        await blobs.start()
        for sha in ("a" * 64, "b" * 64, "c" * 64):
            blobs.path(sha).write_bytes(b"abc")
        (blobs.root / "partial" / "left.partial").write_bytes(b"ab")
        await store.artefacts.add_artefact(_record("old", "a" * 64, NOW - 8 * DAY))
        await store.artefacts.add_artefact(_record("old-shared", "b" * 64, NOW - 9 * DAY))
        await store.artefacts.add_artefact(_record("new-shared", "b" * 64, NOW - DAY, "r2"))
        await service.start()  # "c" is named by no row; the partial is a crash's
        assert not blobs.path("c" * 64).exists()
        assert list((blobs.root / "partial").iterdir()) == []
        assert await service.expire() == 2
        assert not blobs.path("a" * 64).exists()
        assert blobs.path("b" * 64).read_bytes() == b"abc"  # "new-shared" still names it
        assert [r.name for r in await store.artefacts.list_artefacts("team", "r2")] == [
            "new-shared"]
        assert await store.artefacts.list_artefacts("team", "run") == []
    finally:
        await service.close()
        await store.close()
