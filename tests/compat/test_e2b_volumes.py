"""E2B's volumes with the official SDK (sync and async) against a real server: the volume
API, the content API with the volume's token, volumes mounted into sandboxes, shared,
kept after kills, pauses and a restart, confined, bounded.

The module runs its own server: small volumes and a small team quota, and a restart of
its own. ``E2B_VOLUME_API_URL`` points the content API at it (the SDK's default is
``https://api.<domain>``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from bac_process import ServerProcess, running

from bac_server.host import mount_table

SIZE_MB = 32
_ENV = ("E2B_API_URL", "E2B_SANDBOX_URL", "E2B_API_KEY", "E2B_VOLUME_API_URL")


@pytest.fixture(scope="module")
def vserver() -> Iterator[ServerProcess]:
    with running("volumes", BAC_VOLUME_SIZE_MB=str(SIZE_MB),
                 BAC_VOLUME_QUOTA_MB=str(SIZE_MB * 4)) as srv:
        srv.create_key("vol")
        srv.create_key("vol-other")
        try:
            yield srv
        finally:
            srv.kill_all_sandboxes()
            srv.destroy_all_volumes()
            # Nothing of the volumes is left mounted on the host.
            assert not [m for m in mount_table()
                        if m.mount_point.startswith(str(srv.data_dir / "volumes"))]


@pytest.fixture(scope="module", autouse=True)
def e2b_env(vserver: ServerProcess) -> Iterator[None]:
    """This module's server, not the directory's (this fixture replaces conftest's)."""
    saved = {k: os.environ.get(k) for k in _ENV}
    for key in ("E2B_API_URL", "E2B_SANDBOX_URL", "E2B_VOLUME_API_URL"):
        os.environ[key] = vserver.url
    os.environ["E2B_API_KEY"] = vserver.keys[0]
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _name(prefix: str = "v") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@contextlib.contextmanager
def _volume(name: str | None = None) -> Iterator[object]:
    from e2b import Volume

    vol = Volume.create(name or _name())
    try:
        yield vol
    finally:
        Volume.destroy(vol.volume_id)


def test_volume_api_sync_create_list_get_connect_destroy(vserver: ServerProcess) -> None:
    """Volume.create/list/get_info/connect/destroy as E2B's SDK calls them; a name is one
    volume per team; another team sees none of it; destroying twice is False."""
    from e2b import Volume, VolumeException, VolumeNotFoundException

    vol = Volume.create(_name("api"))
    assert vol.token and vol.volume_id.isalnum()
    info = Volume.get_info(vol.volume_id)
    assert (info.volume_id, info.name, info.token) == (vol.volume_id, vol.name, vol.token)
    # Bac's own domain: without E2B_VOLUME_API_URL the token never goes to E2B's hosts.
    assert info.domain == f"localhost:{vserver.port}"
    assert (vol.volume_id, vol.name) in [(v.volume_id, v.name) for v in Volume.list()]
    again = Volume.connect(vol.volume_id)
    assert again.token == vol.token
    with pytest.raises(VolumeException, match="409"):
        Volume.create(vol.name)
    other = vserver.keys[1]
    assert vol.volume_id not in [v.volume_id for v in Volume.list(api_key=other)]
    with pytest.raises(VolumeNotFoundException):
        Volume.get_info(vol.volume_id, api_key=other)
    assert not Volume.destroy(vol.volume_id, api_key=other)
    with pytest.raises(VolumeException, match="400"):
        Volume.create("../etc")
    assert Volume.destroy(vol.volume_id)
    assert not Volume.destroy(vol.volume_id)
    with pytest.raises(VolumeNotFoundException):
        Volume.get_info(vol.volume_id)


def test_content_api_sync_read_write_list_make_dir_metadata_remove() -> None:
    """Every content call of Volume, with the fields of VolumeEntryStat; errors as the
    SDK's exceptions; a wrong token is refused."""
    from e2b import (
        AuthenticationException,
        NotFoundException,
        Volume,
        VolumeException,
        VolumePathNotFoundException,
    )

    with _volume() as vol:
        st = vol.write_file("/docs/a.txt", "hello", mode=0o640)
        assert (st.name, st.path, st.size, st.mode, st.uid, st.gid) == \
            ("a.txt", "/docs/a.txt", 5, 0o640, 1000, 1000)
        assert st.type.value == "file" and st.mtime.tzinfo is not None
        assert vol.read_file("/docs/a.txt") == "hello"
        assert vol.read_file("docs/a.txt", format="bytes") == b"hello"
        assert b"".join(vol.read_file("/docs/a.txt", format="stream")) == b"hello"
        vol.write_file("/docs/a.txt", b"replaced", uid=0, gid=0)
        assert vol.get_info("/docs/a.txt").uid == 0
        made = vol.make_dir("/x/y/z", force=True, mode=0o700)
        assert (made.type.value, made.mode) == ("directory", 0o700)
        with pytest.raises(VolumeException, match="409"):
            vol.make_dir("/x/y/z")
        with pytest.raises(VolumePathNotFoundException):
            vol.make_dir("/no/parent")
        top = {e.path: e.type.value for e in vol.list("/")}
        assert top == {"/docs": "directory", "/x": "directory"}
        deep = [e.path for e in vol.list("/", depth=3)]
        assert "/x/y" in deep and "/x/y/z" in deep and "/docs/a.txt" in deep
        changed = vol.update_metadata("/docs/a.txt", uid=1000, gid=1000, mode=0o600)
        assert (changed.uid, changed.gid, changed.mode) == (1000, 1000, 0o600)
        assert vol.exists("/docs/a.txt") and not vol.exists("/docs/none")
        with pytest.raises(VolumePathNotFoundException):
            vol.read_file("/docs/none")
        with pytest.raises(VolumeException, match="400"):
            vol.read_file("/docs")  # a directory
        vol.remove("/x")
        assert not vol.exists("/x/y/z")
        with pytest.raises(VolumePathNotFoundException):
            vol.remove("/x")
        wrong = Volume(vol.volume_id, vol.name, token="0" * 32)
        with pytest.raises(AuthenticationException):
            wrong.read_file("/docs/a.txt")
        with pytest.raises(NotFoundException):
            vol.get_info("/gone")


def test_content_api_async() -> None:
    """The same through AsyncVolume, and one mounted by an AsyncSandbox."""
    from e2b import AsyncSandbox, AsyncVolume, VolumePathNotFoundException

    async def main() -> None:
        vol = await AsyncVolume.create(_name("async"))
        try:
            await vol.write_file("/d/f.bin", b"\x00\x01" * 1000)
            assert await vol.read_file("/d/f.bin", format="bytes") == b"\x00\x01" * 1000
            assert [e.name for e in await vol.list("/d")] == ["f.bin"]
            await vol.make_dir("/e", uid=0, gid=0)
            assert (await vol.get_info("/e")).uid == 0
            assert (await vol.update_metadata("/e", mode=0o711)).mode == 0o711
            await vol.remove("/d/f.bin")
            with pytest.raises(VolumePathNotFoundException):
                await vol.get_info("/d/f.bin")
            info = await AsyncVolume.get_info(vol.volume_id)
            assert info.token == vol.token
            sbx = await AsyncSandbox.create(timeout=60, volume_mounts={"/mnt/a": vol})
            try:
                await sbx.files.write("/mnt/a/from-async.txt", "x")
            finally:
                await sbx.kill()
            assert await vol.read_file("/from-async.txt") == "x"
        finally:
            assert await AsyncVolume.destroy(vol.volume_id)

    asyncio.run(main())


def test_shared_by_two_sandboxes_kept_after_kill_and_restart(vserver: ServerProcess) -> None:
    """A volume one sandbox writes (as its user) another reads at once, with sane owners
    in both and through the API; the files stay after both are killed and after a
    server restart (its file system unmounted meanwhile, as by a reboot), and a sandbox
    made after it sees them; a mounted volume cannot be destroyed (409); a fork mounts its
    source's volumes, a snapshot is refused (409)."""
    from e2b import Sandbox, SandboxException, Volume, VolumeException

    with _volume() as vol:
        a = Sandbox.create(timeout=120, volume_mounts={"/mnt/shared": vol})
        b = Sandbox.create(timeout=120, volume_mounts={"/data": vol.name})
        try:
            assert a.get_info().volume_mounts == [{"name": vol.name, "path": "/mnt/shared"}]
            a.commands.run("mkdir -p /mnt/shared/out && echo from-a > /mnt/shared/out/a.txt")
            seen = b.commands.run("cat /data/out/a.txt && stat -c '%U:%G' /data/out/a.txt")
            assert seen.stdout.split() == ["from-a", "user:user"]
            b.commands.run("echo from-b >> /data/out/a.txt")
            assert a.files.read("/mnt/shared/out/a.txt") == "from-a\nfrom-b\n"
            st = vol.get_info("/out/a.txt")
            assert (st.uid, st.gid) == (1000, 1000)
            with pytest.raises(VolumeException, match="409"):
                Volume.destroy(vol.volume_id)
            # A snapshot, which could outlive the volume, is refused; a fork mounts it too.
            with pytest.raises(SandboxException, match="409"):
                a.create_snapshot()
            [fork] = a.fork()
            try:
                assert fork.get_info().volume_mounts == \
                    [{"name": vol.name, "path": "/mnt/shared"}]
                fork.commands.run("echo from-fork > /mnt/shared/out/f.txt")
                assert b.files.read("/data/out/f.txt") == "from-fork\n"
            finally:
                fork.kill()
            vol.remove("/out/f.txt")
        finally:
            a.kill()
            b.kill()
        assert vol.read_file("/out/a.txt") == "from-a\nfrom-b\n"
        vserver.stop()
        # As after a host reboot: the volume's file system is no longer mounted.
        subprocess.run(["umount", str(vserver.data_dir / "volumes" / vol.volume_id / "mnt")],
                       check=True)
        vserver.start()
        assert vol.read_file("/out/a.txt") == "from-a\nfrom-b\n"
        c = Sandbox.create(timeout=60, volume_mounts={"/srv/v": vol})
        try:
            assert c.commands.run("cat /srv/v/out/a.txt").stdout == "from-a\nfrom-b\n"
        finally:
            c.kill()


def test_content_api_never_leaves_the_volume() -> None:
    """Symlinks a sandbox plants in a volume (to /, to a host file, up with ..) and
    ``..`` in paths never take the content API out of the volume: reads find nothing
    outside, a write replaces the link instead of writing through it, a remove removes
    the link. Fails if any call reached the host's files."""
    from e2b import Sandbox, VolumePathNotFoundException

    marker = Path("/tmp") / f"bac-escape-{uuid.uuid4().hex}"
    marker.write_text("host secret")
    try:
        with _volume() as vol:
            sbx = Sandbox.create(timeout=60, volume_mounts={"/mnt/v": vol})
            try:
                sbx.commands.run(
                    f"cd /mnt/v && ln -s / root && ln -s {marker} abs && "
                    f"ln -s ../../../../../..{marker} up && mkdir d && ln -s ../../.. d/dots",
                    user="root")
            finally:
                sbx.kill()
            for path in ("/abs", "/up", "/root" + str(marker), "/d/dots" + str(marker),
                         "/../../../.." + str(marker), "../" * 8 + str(marker)[1:]):
                with pytest.raises(VolumePathNotFoundException):
                    vol.read_file(path)
            # "/" resolves to the volume's own top.
            assert {e.name for e in vol.list("/root")} == {"root", "abs", "up", "d"}
            assert vol.get_info("/abs").target == str(marker)
            assert vol.get_info("/abs").type.value == "symlink"
            vol.write_file("/abs", "overwritten")
            assert marker.read_text() == "host secret"
            assert vol.get_info("/abs").type.value == "file"
            # Through the link to "/": the volume's own top, where the parents are made.
            vol.write_file("/root" + str(marker), "through a link")
            assert vol.read_file(str(marker)) == "through a link"
            assert marker.read_text() == "host secret"
            vol.write_file("/../../x.txt", "top")
            assert vol.read_file("/x.txt") == "top"
            vol.update_metadata("/up", uid=0)
            vol.remove("/root")
            assert marker.exists() and Path("/etc/passwd").exists()
    finally:
        marker.unlink()


def test_bad_mounts_are_refused_with_400_or_404_and_leave_nothing(vserver: ServerProcess) -> None:
    """Relative, root, system and symlink-crossing mount paths, overlapping paths and an
    unknown or another team's volume: a clear 4xx, no sandbox left behind."""
    from e2b import Sandbox, SandboxException, Volume

    other = Volume.create(_name("other"), api_key=vserver.keys[1])
    try:
        with _volume() as vol:
            for mounts, status in (({"relative": vol}, "400"), ({"/": vol}, "400"),
                                   ({"/proc/x": vol}, "400"), ({"/dev": vol}, "400"),
                                   ({"/mnt/../etc": vol}, "400"),
                                   ({"/opt": vol}, "400"),  # over envd's /opt/bac
                                   ({"/run": vol}, "400"),
                                   ({"/var/run/x": vol}, "400"),  # /var/run is a symlink
                                   ({"/a": vol, "/a/b": vol}, "400"),
                                   ({"/mnt/x": "no-such-volume"}, "404"),
                                   ({"/mnt/x": other.name}, "404")):
                with pytest.raises(SandboxException, match=status):
                    Sandbox.create(timeout=30, volume_mounts=mounts)
            assert Sandbox.list().next_items() == []
    finally:
        Volume.destroy(other.volume_id, api_key=vserver.keys[1])


def test_quota_and_a_full_volume() -> None:
    """The team's volumes are bounded together (a clear 400 past it); a volume's own size
    bounds writes, through the API (507) and inside a sandbox (ENOSPC)."""
    from e2b import Sandbox, Volume, VolumeException

    made = [Volume.create(_name("q")) for _ in range(4)]
    try:
        with pytest.raises(VolumeException, match=r"400.*quota"):
            Volume.create(_name("q"))
        with pytest.raises(VolumeException, match="507"):
            made[0].write_file("/big", b"\x01" * ((SIZE_MB + 1) << 20))
        assert not made[0].exists("/big")
        sbx = Sandbox.create(timeout=60, volume_mounts={"/v": made[1]})
        try:
            run = sbx.commands.run(f"dd if=/dev/zero of=/v/f bs=1M count={SIZE_MB + 8} 2>&1"
                                   " || echo FULL")
            assert "No space left" in run.stdout and "FULL" in run.stdout
        finally:
            sbx.kill()
    finally:
        for vol in made:
            Volume.destroy(vol.volume_id)


@pytest.mark.slow
def test_pause_and_resume_keep_the_volume_live(vserver: ServerProcess) -> None:
    """A paused sandbox (to disk with its memory, across a server restart; then files
    only) comes back with its volume mounted, live: what was written meanwhile through
    the API is there, a process holding a file open on it is restored with it."""
    from e2b import Sandbox

    with _volume() as vol:
        sbx = Sandbox.create(timeout=120, volume_mounts={"/mnt/v": vol})
        try:
            # A file held open on the volume across the dump: CRIU reopens it there.
            sbx.commands.run("sleep 600 > /dev/null 2>&1 3>> /mnt/v/held.txt &")
            sbx.commands.run("echo before > /mnt/v/a.txt")
            assert sbx.pause()
            vol.write_file("/during.txt", "while paused")
            vserver.stop()
            vserver.start()
            sbx.connect()
            assert sbx.commands.run("cat /mnt/v/a.txt /mnt/v/during.txt").stdout == \
                "before\nwhile paused"
            sbx.commands.run("echo after > /mnt/v/b.txt")
            assert vol.read_file("/b.txt") == "after\n"
            assert sbx.commands.run("pgrep -c sleep").stdout.strip() == "1"
            # Files only: its processes start afresh, the volume is bound again.
            assert sbx.pause(mode="filesystem")
            sbx.connect()
            assert sbx.commands.run("cat /mnt/v/b.txt").stdout == "after\n"
            sbx.commands.run("echo again > /mnt/v/c.txt")
            assert vol.read_file("/c.txt") == "again\n"
        finally:
            sbx.kill()


@pytest.mark.slow
def test_checkpoints_roll_back_files_but_keep_the_volume_live(vserver: ServerProcess) -> None:
    """A sandbox rolled back to a checkpoint (with its memory, then files only) keeps its
    volume bound, live: what was written there after the checkpoint stays."""
    import httpx
    from e2b import Sandbox

    with _volume() as vol:
        sbx = Sandbox.create(timeout=120, volume_mounts={"/mnt/v": vol})
        api = httpx.Client(base_url=vserver.url, timeout=60,
                           headers={"X-API-KEY": vserver.keys[0]})
        try:
            for memory in (True, False):
                taken = api.post(f"/sandboxes/{sbx.sandbox_id}/checkpoints",
                                 json={"memory": memory})
                assert taken.status_code == 201, taken.text
                sbx.commands.run(f"echo {memory} > /mnt/v/after.txt && touch /home/user/x")
                back = api.post(f"/sandboxes/{sbx.sandbox_id}/checkpoints/"
                                f"{taken.json()['checkpointID']}/restore", json={})
                assert back.status_code == 200, back.text
                run = sbx.commands.run("cat /mnt/v/after.txt; ls /home/user/x 2>&1 || true")
                assert run.stdout.startswith(f"{memory}\n") and "No such file" in run.stdout
        finally:
            api.close()
            sbx.kill()
