"""Artefacts through Bac's SDK against a real server and real sandboxes: promotion is
idempotent (the same bytes twice: one record; other bytes: 409), directories come as the
same tar every time, concurrent promotions make one record, the trace records each,
reading goes through the sandbox (a symlink to a host file finds nothing), quota, per-team
scoping, delete."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import io
import secrets
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sdk_server import BacServer, running_server

import bac
from bac import Artefacts, AsyncArtefacts, AsyncSandbox, ConnectionOpts, Sandbox

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _opts(server: BacServer, key: str | None = None) -> ConnectionOpts:
    return ConnectionOpts(api_url=server.url, api_key=key or server.api_key)


def _run() -> str:
    return f"run-{time.monotonic_ns()}"


def test_the_same_file_twice_is_one_record_and_other_bytes_are_a_conflict(
        bac_server: BacServer) -> None:
    """A file promoted twice under one name gives one record (201 then 200, the same
    record); other bytes under that name raise ArtefactConflictError and change nothing;
    the download is the bytes, the sha256 theirs; the trace has both promotions."""
    run = _run()
    data = secrets.token_bytes(200_000)
    with Sandbox.create(timeout=120, **_opts(bac_server)) as box:
        box.files.write("/home/user/out.bin", data)
        first = box.artefacts.promote("/home/user/out.bin", "out.bin", run_id=run)
        assert first.created is True
        assert (first.run_id, first.name, first.kind, first.size_bytes, first.sha256,
                first.sandbox_id, first.path) == (
            run, "out.bin", "file", len(data), hashlib.sha256(data).hexdigest(),
            box.sandbox_id, "/home/user/out.bin")
        again = box.artefacts.promote("/home/user/out.bin", "out.bin", run_id=run)
        assert again.created is False
        assert again == dataclasses.replace(first, created=False)
        box.files.write("/home/user/out.bin", b"other bytes")
        with pytest.raises(bac.ArtefactConflictError) as refused:
            box.artefacts.promote("/home/user/out.bin", "out.bin", run_id=run)
        assert refused.value.status_code == 409 and first.sha256 in str(refused.value)
        assert [a.sha256 for a in box.artefacts.list(run)] == [first.sha256]
        assert box.artefacts.download(run, "out.bin") == data
        promoted = box.trace(kinds=["artefact_promoted"]).events
        assert [ev.fields["created"] for ev in promoted] == ["true", "false"]
        assert {ev.fields["sha256"] for ev in promoted} == {first.sha256}
        assert promoted[0].fields["run_id"] == run and promoted[0].fields["name"] == "out.bin"
    # Kept after the sandbox ended.
    with Artefacts(**_opts(bac_server)) as artefacts:
        assert artefacts.download(run, "out.bin") == data


def test_a_directory_is_the_same_tar_every_time_with_links_kept_as_links(
        bac_server: BacServer) -> None:
    """A directory comes as a tar of its tree; written again with new times it promotes
    as the same bytes (a no-op); its symlinks are links in the tar, never followed."""
    run = _run()
    script = ("rm -rf /home/user/res && mkdir -p /home/user/res/sub && cd /home/user/res && "
              "printf alpha > a.txt && printf beta > sub/b.txt && ln -s /etc/passwd pw && "
              "echo 'raise SystemExit(9)' > /home/user/tarfile.py")  # never imported
    with Sandbox.create(timeout=120, **_opts(bac_server)) as box:
        box.commands.run(script)
        first = box.artefacts.promote("/home/user/res", "res", run_id=run)
        assert (first.created, first.kind) == (True, "directory")
        # The same tree written anew, with other times.
        box.commands.run(script + " && touch -d 2001-02-03 a.txt sub/b.txt sub .")
        assert box.artefacts.promote("res", "res", run_id=run).created is False
        tar = box.artefacts.download(run, "res")
    assert hashlib.sha256(tar).hexdigest() == first.sha256
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        members = {m.name: m for m in archive.getmembers()}
        assert {"./a.txt", "./sub/b.txt", "./pw"} <= set(members)
        assert members["./pw"].issym() and members["./pw"].linkname == "/etc/passwd"
        assert {m.mtime for m in members.values()} == {0}
        read = archive.extractfile(members["./sub/b.txt"])
        assert read is not None and read.read() == b"beta"


def test_a_symlink_to_a_host_path_reads_inside_the_sandbox(bac_server: BacServer,
                                                           tmp_path: Path) -> None:
    """A link the sandbox makes to a path that exists only on the host finds nothing:
    the file is read inside the sandbox, never through its root file system from the
    host; a missing path is PathNotFoundError; a file only root may read is refused
    (the copy runs as the sandbox's default user)."""
    secret = tmp_path / "host-only-secret"
    secret.write_text(secrets.token_hex(16))
    run = _run()
    with Sandbox.create(timeout=120, **_opts(bac_server)) as box:
        box.commands.run(f"ln -s {secret} /home/user/link")
        with pytest.raises(bac.PathNotFoundError):
            box.artefacts.promote("/home/user/link", "link", run_id=run)
        with pytest.raises(bac.PathNotFoundError):
            box.artefacts.promote("/nowhere", "nowhere", run_id=run)
        box.commands.run("sudo sh -c 'echo s > /root/only-root && chmod 600 /root/only-root'")
        with pytest.raises(bac.InvalidArgumentError, match="Permission denied"):
            box.artefacts.promote("/root/only-root", "only-root", run_id=run)
        assert box.artefacts.list(run) == []


async def test_concurrent_identical_promotions_make_one_record(bac_server: BacServer,
                                                                tmp_path: Path) -> None:
    """Eight identical promotions at once: one record, made by exactly one of them; the
    team's client streams it to a file."""
    run = _run()
    data = secrets.token_bytes(50_000)
    async with await AsyncSandbox.create(timeout=120, **_opts(bac_server)) as box:
        await box.files.write("/home/user/same.txt", data)
        done = await asyncio.gather(*(box.artefacts.promote("/home/user/same.txt", "same",
                                                            run_id=run) for _ in range(8)))
        assert sorted(d.created for d in done) == [False] * 7 + [True]
        assert len({d.sha256 for d in done}) == 1
        assert len(await box.artefacts.list(run)) == 1
    async with AsyncArtefacts(**_opts(bac_server)) as artefacts:
        target = await artefacts.download_to(run, "same", tmp_path / "same")
        assert target.read_bytes() == data
        assert not (tmp_path / ".same.partial").exists()


def test_artefacts_are_the_teams_and_deleted_with_their_bytes(bac_server: BacServer) -> None:
    """Another team sees no artefact of the run; a paused sandbox is a 409 that is not an
    artefact conflict; delete removes it (then not found); bad names and bodies are 400s
    with {code, message}."""
    run = _run()
    with Sandbox.create(timeout=120, **_opts(bac_server)) as box:
        box.files.write("/home/user/x", b"x")
        box.artefacts.promote("/home/user/x", "x", run_id=run)
        with Artefacts(**_opts(bac_server, bac_server.other_team_key)) as other:
            assert other.list(run) == []
            with pytest.raises(bac.ArtefactNotFoundError):
                other.download(run, "x")
            with pytest.raises(bac.ArtefactNotFoundError):
                other.delete(run, "x")
            with pytest.raises(bac.SandboxNotFoundError):
                other.promote(box.sandbox_id, "/home/user/x", "y", run_id=run)
        with pytest.raises(bac.InvalidArgumentError):
            box.artefacts.promote("/home/user/x", "../x", run_id=run)
        box.pause()
        with pytest.raises(bac.AlreadyExistsError, match="paused") as paused:
            box.artefacts.promote("/home/user/x", "x2", run_id=run)
        assert not isinstance(paused.value, bac.ArtefactConflictError)
        box.resume()
        box.artefacts.delete(run, "x")
        with pytest.raises(bac.ArtefactNotFoundError):
            box.artefacts.download(run, "x")
        assert box.artefacts.list(run) == []
        headers = {"X-API-KEY": bac_server.api_key}
        for body in ({}, {"path": "/x", "name": "x"}, {"path": 1, "name": "x", "runId": "r"},
                     {"path": "/x", "name": "x", "runId": "r", "more": 1}):
            answer = httpx.post(f"{bac_server.url}/sandboxes/{box.sandbox_id}/artefacts",
                                json=body, headers=headers)
            assert answer.status_code == 400 and answer.json()["code"] == 400, answer.text
        answer = httpx.get(f"{bac_server.url}/artefacts", headers=headers)
        assert answer.status_code == 400 and "runId" in answer.json()["message"]


@pytest.fixture(scope="module")
def small_quota_server(monkeypatch_module: pytest.MonkeyPatch) -> Iterator[BacServer]:
    monkeypatch_module.setenv("BAC_ARTEFACT_QUOTA_MB", "1")
    with running_server() as server:
        yield server


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_the_teams_quota_refuses_what_would_pass_it(small_quota_server: BacServer) -> None:
    """With a 1 MiB quota, 700 KB promote and the next 700 KB are refused with
    NotEnoughSpaceError (507), leaving no record; a promotion of the same bytes again
    still succeeds (it adds nothing); an 8 GB file is stopped once past the quota, its
    copy killed in the sandbox."""
    run = _run()
    opts = _opts(small_quota_server)
    with Sandbox.create(timeout=120, **opts) as box:
        box.files.write("/home/user/a", secrets.token_bytes(700_000))
        box.files.write("/home/user/b", secrets.token_bytes(700_000))
        box.artefacts.promote("/home/user/a", "a", run_id=run)
        with pytest.raises(bac.NotEnoughSpaceError):
            box.artefacts.promote("/home/user/b", "b", run_id=run)
        assert box.artefacts.promote("/home/user/a", "a", run_id=run).created is False
        box.commands.run("truncate -s 8G /home/user/huge")  # sparse: read for minutes
        with pytest.raises(bac.NotEnoughSpaceError):
            box.artefacts.promote("/home/user/huge", "huge", run_id=run)
        # The copy was stopped in the sandbox, not left reading to its deadline.
        left = box.commands.run("pgrep -f 'python3 -I -[c]' || true")
        assert left.stdout.strip() == ""
        assert [a.name for a in box.artefacts.list(run)] == ["a"]
