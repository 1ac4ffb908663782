"""The data directory against local readers: another host user (uid 65534) and an escaped
sandbox root (host uid 100000) try to read the store, its WAL and shared memory, the key
file, the first API key, slot and checkpoint state and CRIU images of a real server whose
sandbox holds a secret in an env var; the store's bytes hold no secret in clear; the
start-up check repairs loosened modes and refuses what it cannot repair."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))

import httpx
from bac_process import ServerProcess, fresh_data_dir, remove_data_dir

from bac import Sandbox
from bac_server.host import IdRange, UnsafeDataDir, secure_data_dir

pytestmark = pytest.mark.root

SECRET = "sk-proj-DATADIRTEST-7f3a9c1e5b2d4f6a8c0e"
NOBODY = 65534
SANDBOX_ROOT = IdRange().root

# Runs as the probing user: every path's outcome, "read" or the errno's name.
_PROBE = """
import errno, json, os, sys
out = {}
for path in sys.argv[1:]:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as handle:
                handle.read(1)
        out[path] = "read"
    except OSError as exc:
        out[path] = errno.errorcode.get(exc.errno, str(exc.errno))
print(json.dumps(out))
"""


@dataclass
class Served:
    server: ServerProcess
    sandbox_id: str
    paused_id: str
    envd_token: str
    traffic_token: str
    checkpoint_id: str
    opts: dict[str, Any] = field(default_factory=dict)

    @property
    def data_dir(self) -> Path:
        return Path(self.server.data_dir)


def _create(client: httpx.Client, env: dict[str, str]) -> dict[str, str]:
    made = client.post("/sandboxes", json={
        "templateID": "base", "timeout": 300, "envVars": env,
        "network": {"allowPublicTraffic": False}})
    assert made.status_code == 201, made.text
    body: dict[str, str] = made.json()
    return body


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    """A server whose data dir holds what an attacker wants: a running sandbox with a
    secret env var (and its checkpoint, images included), a sandbox paused to disk, and
    a first API key left 0644 by a careless operator before the first start."""
    server = ServerProcess(fresh_data_dir("data-dir"))
    key = server.create_key("victims")
    first_key = server.data_dir / "first-api-key"
    first_key.write_text(key + "\n")
    first_key.chmod(0o644)
    server.start()
    opts: dict[str, Any] = {"api_key": key, "api_url": server.url, "sandbox_url": server.url}
    try:
        with httpx.Client(base_url=server.url, headers={"X-API-KEY": key},
                          timeout=120) as client:
            running = _create(client, {"OPENAI_API_KEY": SECRET})
            paused = _create(client, {"OPENAI_API_KEY": SECRET})
            with contextlib.closing(Sandbox.connect(running["sandboxID"], **opts)) as sbx:
                assert sbx.commands.run("echo $OPENAI_API_KEY").stdout.strip() == SECRET
                checkpoint = sbx.checkpoint()
            Sandbox.pause(paused["sandboxID"], **opts)
        yield Served(server, running["sandboxID"], paused["sandboxID"],
                     running["envdAccessToken"], running["trafficAccessToken"],
                     checkpoint.checkpoint_id, opts)
    finally:
        if server.proc is None or server.proc.poll() is not None:
            server.start()  # a test stopped it: its sandboxes still need killing
        server.kill_all_sandboxes()
        server.stop()
    remove_data_dir(server)


def _slots(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "sandboxes").iterdir())


def _slot_of(data_dir: Path, sandbox_id: str) -> Path:
    for slot in _slots(data_dir):
        if json.loads((slot / "state.json").read_text()).get("sandbox_id") == sandbox_id:
            return slot
    raise AssertionError(f"no slot holds {sandbox_id}")


def _targets(served: Served) -> list[Path]:
    """Everything in the data dir that holds a secret or a way in, as root sees it."""
    data = served.data_dir
    db = data / "bac.db"
    # An open connection keeps the WAL and shared-memory files in place while probing.
    targets = [data, db, Path(f"{db}-wal"), Path(f"{db}-shm"), data / "keys",
               data / "keys" / "store.key", data / "first-api-key"]
    for slot in _slots(data):
        targets += [slot / "state.json", slot / "config.json"]
        images = slot / "suspend" / "images"
        if images.is_dir():
            targets += [images, *sorted(images.glob("pages-*.img"))]
    checkpoint = data / "checkpoints" / served.checkpoint_id
    images = checkpoint / "images"
    targets += [checkpoint / "meta.json", checkpoint / "config.json", images,
                *sorted(images.glob("pages-*.img"))]
    missing = [p for p in targets if not p.exists()]
    assert not missing, f"the probe's targets are not where the server keeps them: {missing}"
    assert any(p.parent.name == "images" and p.parent.parent.name == "suspend"
               for p in targets), "no suspend images to probe"
    return targets


def _probe_as(uid: int, gid: int, paths: list[Path]) -> dict[str, str]:
    result = subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
         "/usr/bin/python3", "-I", "-c", _PROBE, *map(str, paths)],
        capture_output=True, text=True, timeout=60, check=True)
    outcome: dict[str, str] = json.loads(result.stdout)
    return outcome


def _hold_wal_open(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db)
    conn.execute("SELECT count(*) FROM sandboxes").fetchall()
    return conn


def test_another_host_user_reads_nothing_in_the_data_dir(served: Served) -> None:
    """uid 65534 cannot open bac.db, its WAL or shared memory, the key file, the first
    API key, a slot's state or config, a checkpoint's metadata or CRIU images: every
    attempt fails with EACCES (it cannot even enter the data dir)."""
    conn = _hold_wal_open(served.data_dir / "bac.db")
    try:
        outcome = _probe_as(NOBODY, NOBODY, _targets(served))
    finally:
        conn.close()
    assert set(outcome.values()) == {"EACCES"}, outcome


def test_an_escaped_sandbox_root_reads_no_secret_in_the_data_dir(served: Served) -> None:
    """The sandboxes' root uid and gid (100000, what root inside is on the host) may
    traverse the data dir, the way the runtime must go, but opens none of the store, the
    key, slot state or checkpoint images of any sandbox: EACCES for each."""
    conn = _hold_wal_open(served.data_dir / "bac.db")
    try:
        targets = [p for p in _targets(served) if p != served.data_dir]
        outcome = _probe_as(SANDBOX_ROOT, SANDBOX_ROOT, targets)
    finally:
        conn.close()
    assert set(outcome.values()) == {"EACCES"}, outcome


def test_root_inside_a_sandbox_finds_no_way_to_the_store(served: Served) -> None:
    """Root inside the sandbox (sudo) reaches neither the store's path nor the host's
    root through /proc; the secret it holds is its own env, nothing more."""
    db = served.data_dir / "bac.db"
    tries = [f"{db}", f"{db}-wal", f"/proc/1/root{db}", f"/proc/self/root{db}",
             f"{served.data_dir}/keys/store.key"]
    script = "; ".join(f"head -c1 {p} >/dev/null 2>&1 && echo READ {p}" for p in tries)
    with contextlib.closing(Sandbox.connect(served.sandbox_id, **served.opts)) as sbx:
        result = sbx.commands.run(f"sudo sh -c '{script}; echo done'")
    assert result.stdout.strip() == "done", result.stdout


def _files_outside_sandboxes(data_dir: Path) -> Iterator[Path]:
    """Every file Bac wrote itself: not the sandboxes' own files (rootfs, upper layers,
    their disks' images and the empty ones they are copied from), nor CRIU's memory
    images (they hold the processes' memory: closed, see the probes)."""
    skip = {"rootfs", "upper", "layer", "images", "devfs", "envd", "etc", "slot-disks"}
    not_bacs = ("server.log", "netns", "disk.img")
    for dirpath, dirnames, filenames in os.walk(data_dir):
        dirnames[:] = [d for d in dirnames if d not in skip]
        for name in filenames:
            path = Path(dirpath, name)
            if path.is_file() and not path.is_symlink() and name not in not_bacs:
                yield path


def test_no_file_of_the_data_dir_holds_a_secret_in_clear(served: Served) -> None:
    """The store (bac.db and its WAL) and every state file of slots and checkpoints hold
    neither the env var's value nor the envd or traffic token in clear."""
    conn = _hold_wal_open(served.data_dir / "bac.db")
    try:
        files = list(_files_outside_sandboxes(served.data_dir))
        contents = {p: p.read_bytes() for p in files}
    finally:
        conn.close()
    assert {"bac.db", "bac.db-wal", "state.json", "meta.json"} <= {p.name for p in files}
    assert served.sandbox_id.encode() in contents[served.data_dir / "bac.db-wal"] + \
        contents[served.data_dir / "bac.db"]  # the probe does see the rows
    for secret in (SECRET, served.envd_token, served.traffic_token):
        holding = [str(p) for p, data in contents.items() if secret.encode() in data]
        assert not holding, f"{secret[:8]}... in clear in {holding}"


def test_start_up_repairs_loosened_modes(served: Served) -> None:
    """Modes an older server or an operator left open are closed again at the next
    start (the data dir, the store, the key, a slot's state, the shared directories), and
    the first API key left 0644 before the first start is 0600."""
    data = served.data_dir
    assert stat.S_IMODE((data / "first-api-key").stat().st_mode) == 0o600
    slot = _slot_of(data, served.sandbox_id)
    loosened = {data: 0o755, data / "bac.db": 0o644, data / "keys": 0o755,
                data / "keys" / "store.key": 0o644, data / "envd": 0o755,
                data / "sandboxes": 0o755, data / "claims": 0o755, slot / "state.json": 0o644}
    served.server.stop()
    for path, mode in loosened.items():
        path.chmod(mode)
    os.chown(data, 0, 0)
    served.server.start()
    expected = {data: 0o710, data / "bac.db": 0o600, data / "keys": 0o700,
                data / "keys" / "store.key": 0o600, data / "envd": 0o710,
                data / "sandboxes": 0o710, data / "claims": 0o700, slot / "state.json": 0o600}
    assert {p: stat.S_IMODE(p.stat().st_mode) for p in expected} == expected
    assert data.stat().st_gid == SANDBOX_ROOT
    with contextlib.closing(Sandbox.connect(served.sandbox_id, **served.opts)) as sbx:
        assert sbx.commands.run("echo $OPENAI_API_KEY").stdout.strip() == SECRET


def test_start_up_refuses_a_symlinked_data_dir(tmp_path: Path) -> None:
    """A data dir that is a symlink stops the server before it listens, with one line
    naming the path."""
    real = fresh_data_dir("data-dir-link")
    link = tmp_path / "data"
    link.symlink_to(real)
    server = ServerProcess(link)
    try:
        with pytest.raises(RuntimeError, match="server exited 1"):
            server.start()
        assert f"refusing to start: data directory {link} is not a directory" in \
            server.log_tail()
    finally:
        server.stop()
        os.unlink(link)
        remove_data_dir(ServerProcess(real))


@pytest.mark.parametrize(("damage", "message"), [
    (lambda d: os.chown(d / "bac.db", NOBODY, NOBODY), "bac.db belongs to uid 65534"),
    (lambda d: (d / "templates").chmod(0o777), "templates was writable by others"),
    (lambda d: (d / "keys").symlink_to("/tmp"), "keys is a symlink"),
    (lambda d: (d / "checkpoints").write_text(""), "checkpoints is not a directory"),
    (lambda d: d.chmod(0o777), "was writable by others"),
])
def test_start_up_check_refuses_what_it_cannot_repair(
        tmp_path: Path, damage: Callable[[Path], object], message: str) -> None:
    """An entry of another user, one others could write, a symlink or a file where Bac
    makes a directory: the check refuses and names the path, changing nothing."""
    data = tmp_path / "data"
    secure_data_dir(data, IdRange())
    (data / "bac.db").write_text("")
    (data / "templates").mkdir(mode=0o700)
    damage(data)
    with pytest.raises(UnsafeDataDir, match=message):
        secure_data_dir(data, IdRange())


def test_start_up_check_refuses_a_data_dir_others_can_rename(tmp_path: Path) -> None:
    """A data dir inside a directory another user may write (not sticky) could be
    swapped for theirs: refused."""
    parent = tmp_path / "shared"
    parent.mkdir()
    parent.chmod(0o777)
    with pytest.raises(UnsafeDataDir, match="which another user can change"):
        secure_data_dir(parent / "data", IdRange())


def test_a_server_of_another_user_keeps_its_data_dir_its_own() -> None:
    """An API replica running as an unprivileged user (docs/scale-out.md): the same check
    as root's, its own group where root's would be, and nobody else gets in."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="bac-replica-"))
    os.chown(base, NOBODY, NOBODY)
    base.chmod(0o755)
    script = ("import sys; from pathlib import Path; "
              "from bac_server.host import IdRange, secure_data_dir; "
              "d = Path(sys.argv[1]); secure_data_dir(d, IdRange()); "
              "(d / 'keys').mkdir(mode=0o755); secure_data_dir(d, IdRange())")
    done = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         sys.executable, "-c", script, str(base / "data")],
        capture_output=True, text=True, check=False, env={"PATH": os.environ["PATH"]})
    assert done.returncode == 0, done.stderr
    data = os.stat(base / "data")
    keys = os.stat(base / "data" / "keys")
    assert (data.st_uid, data.st_gid, stat.S_IMODE(data.st_mode)) == (NOBODY, NOBODY, 0o710)
    assert (keys.st_uid, keys.st_gid, stat.S_IMODE(keys.st_mode)) == (NOBODY, NOBODY, 0o700)
    shutil.rmtree(base)
