"""Secrets at rest in the SQL store: env vars and access tokens sealed with the key file,
rows of older servers sealed by migration 4 with nothing left in clear, and the database
and key files made private."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bac_server.store import CheckpointKind, CheckpointRecord, SandboxRecord, StoreError
from bac_server.store.key_file import KeyFileError, load_sealer
from bac_server.store.sealing import Sealer, SealError
from bac_server.store.sql import SqlStore
from bac_server.store.sql.engine import open_engine
from bac_server.store.sql.migrations import LATEST, STEPS

AtRest = Callable[[str], bytes]  # the conftest's at_rest: what a copy of the database holds

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
SECRET = "sk-live-0123456789abcdefSECRET"
TOKEN = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
TRAFFIC = "a1b2c3d4e5f60718293a4b5c6d7e8f90"


def _url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def _sandbox(sandbox_id: str = "sbx1") -> SandboxRecord:
    return SandboxRecord(
        sandbox_id=sandbox_id, team_id="team", template_id="base", alias=None,
        state="running", started_at=NOW, end_at=NOW + timedelta(minutes=5), cpu_count=2,
        memory_mb=512, disk_mb=1024, envd_access_token=TOKEN, traffic_access_token=TRAFFIC,
        env_vars={"OPENAI_API_KEY": SECRET, "PLAIN": "x"})


def _checkpoint() -> CheckpointRecord:
    return CheckpointRecord(
        checkpoint_id="ck1", team_id="team", sandbox_id="sbx1", kind=CheckpointKind.CHECKPOINT,
        name=None,
        created_at=NOW, size_bytes=1, memory=True, template_id="base",
        envd_access_token=TOKEN, cpu_count=2, memory_mb=512, env_vars={"K": SECRET})


def _modes(directory: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in directory.iterdir()}


def _bytes_on_disk(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists())


async def test_secrets_are_sealed_in_the_rows_and_on_disk(
        database_url: str, at_rest: AtRest) -> None:
    """What a reader of bac.db and its WAL (or of a PostgreSQL dump) gets is ciphertext:
    no env var value, no envd or traffic token; the store itself reads the records back
    unchanged."""
    store = await SqlStore.open(database_url, Sealer(Sealer.new_key()))
    await store.keys.ensure_team("team")
    await store.sandboxes.insert_sandbox(_sandbox())
    await store.checkpoints.add_checkpoint(_checkpoint())
    await store.sandboxes.update_sandbox("sbx1", state="paused")
    assert await store.sandboxes.get_sandbox("sbx1") == replace(_sandbox(), state="paused")
    assert await store.checkpoints.get_checkpoint("ck1") == _checkpoint()
    on_disk = at_rest(database_url)
    await store.close()
    assert b"sbx1" in on_disk  # the probe does see the rows
    for clear in (SECRET, TOKEN, TRAFFIC):
        assert clear.encode() not in on_disk


async def test_command_output_in_the_trace_is_sealed_at_rest(
        database_url: str, at_rest: AtRest) -> None:
    """A process event's output tails (a command may print a secret) are ciphertext on
    disk; the trace reads them back in clear, other fields untouched."""
    from bac_server.store import EventRecord, TraceQuery

    store = await SqlStore.open(database_url, Sealer(Sealer.new_key()))
    await store.keys.ensure_team("team")
    await store.sandboxes.insert_sandbox(_sandbox())
    fields = {"pid": 7, "cmd": "echo $OPENAI_API_KEY", "exit_code": 0,
              "stdout_tail": SECRET + "\n", "stderr_tail": "warn " + SECRET}
    await store.sandboxes.add_event(EventRecord("sbx1", "team", NOW, "process", "ran",
                                                fields=fields))
    [read] = await store.sandboxes.trace(TraceQuery(team_id="team", sandbox_id="sbx1",
                                                    kinds=frozenset({"process"})))
    assert read.fields == fields
    on_disk = at_rest(database_url)
    await store.close()
    assert b"echo $OPENAI_API_KEY" in on_disk  # the command line itself is not sealed
    assert SECRET.encode() not in on_disk


async def test_another_key_or_a_moved_value_does_not_open(database_url: str) -> None:
    """A store opened with another key file refuses the rows (it never guesses); a sealed
    value copied into another row does not open either."""
    sealer = Sealer(Sealer.new_key())
    store = await SqlStore.open(database_url, sealer)
    await store.keys.ensure_team("team")
    await store.sandboxes.insert_sandbox(_sandbox("one"))
    await store.sandboxes.insert_sandbox(replace(_sandbox("two"), envd_access_token="f" * 32))
    await store.close()
    other = await SqlStore.open(database_url, Sealer(Sealer.new_key()))
    with pytest.raises(SealError, match="does not open"):
        await other.sandboxes.get_sandbox("one")
    await other.close()
    engine = open_engine(database_url)
    async with engine.begin() as conn:
        await conn.exec_driver_sql(
            "UPDATE sandboxes SET envd_access_token = (SELECT envd_access_token FROM "
            "sandboxes WHERE sandbox_id = 'one') WHERE sandbox_id = 'two'")
    await engine.dispose()
    store = await SqlStore.open(database_url, sealer)
    assert await store.sandboxes.get_sandbox("one") == _sandbox("one")
    with pytest.raises(SealError, match=r"sandboxes\.envd_access_token:two"):
        await store.sandboxes.get_sandbox("two")
    await store.close()


async def _version_3_database(db: Path) -> None:
    """A database as a server before sealing left it: schema 3, secrets in clear, the
    rows rewritten a few times (old copies of a row linger in SQLite's freed space)."""
    engine = open_engine(_url(db))
    async with engine.begin() as conn:
        for step in STEPS[:3]:
            await conn.run_sync(step.upgrade, Sealer(Sealer.new_key()))
        await conn.exec_driver_sql("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        await conn.exec_driver_sql("INSERT INTO schema_version VALUES (3)")
        await conn.exec_driver_sql("INSERT INTO teams VALUES ('team', 'team', 0)")
        await conn.exec_driver_sql(
            "INSERT INTO sandboxes (sandbox_id, team_id, template_id, state, started_at, "
            "end_at, cpu_count, memory_mb, disk_mb, envd_access_token, traffic_access_token,"
            " metadata, env_vars) VALUES ('old', 'team', 'base', 'running', 0, 1, 2, 512, "
            f"1024, '{TOKEN}', NULL, '{{}}', ?)", (json.dumps({"OPENAI_API_KEY": SECRET}),))
        await conn.exec_driver_sql(
            "INSERT INTO checkpoints VALUES ('ck', 'team', 'old', 'snapshot', NULL, 0, 1, 1, "
            f"'base', '{TOKEN}', 2, 512, ?)", (json.dumps({"K": SECRET}),))
    for state in ("paused", "running", "paused", "running"):
        async with engine.begin() as conn:
            await conn.exec_driver_sql(f"UPDATE sandboxes SET state = '{state}'")
    await engine.dispose()


async def test_plaintext_rows_of_an_older_server_are_sealed_and_scrubbed(
        tmp_path: Path) -> None:
    """Migration 4 seals every row written in clear and compacts the file: afterwards the
    records read back the same and neither the database nor its WAL holds the secret or
    the token anywhere (freed pages and old WAL frames included)."""
    db = tmp_path / "bac.db"
    await _version_3_database(db)
    assert SECRET.encode() in _bytes_on_disk(db)  # the probe finds it before
    store = await SqlStore.open(_url(db), Sealer(Sealer.new_key()))
    sandbox = await store.sandboxes.get_sandbox("old")
    checkpoint = await store.checkpoints.get_checkpoint("ck")
    on_disk = _bytes_on_disk(db)
    await store.close()
    assert sandbox is not None and checkpoint is not None
    assert (sandbox.env_vars, sandbox.envd_access_token) == ({"OPENAI_API_KEY": SECRET}, TOKEN)
    assert sandbox.traffic_access_token is None
    assert (checkpoint.env_vars, checkpoint.envd_access_token) == ({"K": SECRET}, TOKEN)
    assert SECRET.encode() not in on_disk and TOKEN.encode() not in on_disk
    engine = open_engine(_url(db))
    async with engine.connect() as conn:
        version = (await conn.exec_driver_sql(
            "SELECT max(version) FROM schema_version")).scalar()
    await engine.dispose()
    assert version == LATEST


async def test_database_files_are_private(tmp_path: Path) -> None:
    """bac.db is made 0600 before SQLite opens it, so the WAL and shared-memory files
    SQLite makes are 0600 too; files an older server left 0644 are tightened; a symlink
    in the database's place is refused."""
    db = tmp_path / "bac.db"
    store = await SqlStore.open(_url(db), Sealer(Sealer.new_key()))
    await store.keys.ensure_team("team")
    modes = _modes(tmp_path)
    await store.close()
    assert {"bac.db", "bac.db-wal", "bac.db-shm"} <= modes.keys()
    assert set(modes.values()) == {0o600}, modes
    for name in ("bac.db", "bac.db-wal"):
        (tmp_path / name).touch()
        (tmp_path / name).chmod(0o644)
    open_engine(_url(db))
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "bac.db-wal").stat().st_mode) == 0o600
    (tmp_path / "elsewhere").write_text("")
    (tmp_path / "link.db").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StoreError, match="not a file of this server's user"):
        open_engine(_url(tmp_path / "link.db"))


@pytest.mark.root
def test_key_file_is_made_once_private_and_checked(tmp_path: Path) -> None:
    """The first load makes a random key 0600 in a 0700 directory and the next load reads
    the same key; a key file others could read is made 0600; a symlink, a file of another
    user, a directory others can write and a file that holds no key are refused."""
    path = tmp_path / "keys" / "store.key"
    first = load_sealer(path)
    sealed = first.seal("v", "t.c:1")
    assert load_sealer(path).open(sealed, "t.c:1") == "v"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    path.chmod(0o644)
    assert load_sealer(path).open(sealed, "t.c:1") == "v"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    os.chown(path, 65534, 65534)
    with pytest.raises(KeyFileError, match="not a file of this server's user"):
        load_sealer(path)
    os.chown(path, 0, 0)
    path.parent.chmod(0o777)
    with pytest.raises(KeyFileError, match="writable by others"):
        load_sealer(path)
    path.parent.chmod(0o700)
    link = tmp_path / "keys" / "link.key"
    link.symlink_to(path)
    with pytest.raises(KeyFileError, match="cannot be opened"):
        load_sealer(link)
    path.write_text("not a key\n")
    with pytest.raises(KeyFileError, match="does not hold a key"):
        load_sealer(path)


def test_a_derived_key_is_the_same_wherever_the_store_key_is() -> None:
    """What replicas sign with alike (upload URLs): one per purpose, from the store key,
    and nothing like the store key itself."""
    key = Sealer.new_key()
    one, two = Sealer(key), Sealer(key)
    assert one.derive("template-uploads") == two.derive("template-uploads")
    assert len(one.derive("template-uploads")) == 32
    assert one.derive("template-uploads") != one.derive("other")
    assert one.derive("template-uploads") != Sealer(Sealer.new_key()).derive(
        "template-uploads")
    assert key not in (one.derive("template-uploads"), one.derive(""))
