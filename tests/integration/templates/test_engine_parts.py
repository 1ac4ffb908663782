"""The build engine's parts that need no sandbox: cache keys, build state, the COPY upload's
unpacking and matching, the layer store's publish/lock/sweep, and manifests."""

from __future__ import annotations

import asyncio
import fcntl
import io
import os
import stat
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

from bac_server.backends.base import TemplateNotFound
from bac_server.host import IdRange
from bac_server.templates import CopyStep, RunStep, TemplateBuildError, TemplateConfig
from bac_server.templates._flock import locked
from bac_server.templates.build._copy import destination, match, unpack
from bac_server.templates.build._state import BuildState, step_key
from bac_server.templates.layers import (
    LayerStore,
    make_built,
    read_manifest,
    template_image,
    write_manifest,
)

SANDBOX_ROOT = IdRange().root


def test_keys_follow_inputs_not_force() -> None:
    """A key changes with the parent, the files, the state; never with ``force``."""
    state = BuildState(user="user", home="/home/user")
    copy = CopyStep(src="app", dest="/app/", files_hash="a" * 64)
    key = step_key("p", copy, state)
    assert key == step_key("p", CopyStep(src="app", dest="/app/", files_hash="a" * 64,
                                         force=True), state)
    assert key != step_key("q", copy, state)
    assert key != step_key("p", CopyStep(src="app", dest="/app/", files_hash="b" * 64), state)
    assert key != step_key("p", copy, state.with_env((("A", "1"),)))
    assert key != step_key("p", copy, state.with_workdir("/srv"))
    assert key != step_key("p", copy, state, nonce="n")
    assert len(key) == 32


def test_env_expands_like_dockerfile_env() -> None:
    """ENV values see earlier ones (``$A``, ``${A}``), ``\\$`` is literal, PATH has a default."""
    state = BuildState().with_env((("A", "1"), ("B", "${A}2\\$A"), ("PATH", "/x:$PATH")))
    env = dict(state.env)
    assert env["B"] == "12$A"
    assert env["PATH"].startswith("/x:/usr/local/sbin:")
    assert dict(BuildState().step_env())["PATH"].startswith("/usr/local/sbin")


def test_workdir_and_destination_resolve_against_the_state() -> None:
    """WORKDIR is relative to the current directory; a COPY dest keeps its trailing '/'."""
    state = BuildState(home="/home/user").with_workdir("app").with_workdir("../srv")
    assert state.cwd == "/home/user/srv"
    assert destination("conf/", state.cwd) == "/home/user/srv/conf/"
    assert destination("/etc/x", state.cwd) == "/etc/x"
    assert destination("/", state.cwd) == "/"


def _tar(tmp: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    path = tmp / "upload.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            info.size = len(data or b"")
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode, info.uid, info.gid = mode, 1234, 1234
    return info


@pytest.mark.root
async def test_unpack_owns_files_by_sandbox_root_and_matches(tmp_path: Path) -> None:
    """The upload unpacks owned by the given id (the uid it runs as); ``src`` matches
    files, dirs and globs."""
    folder = tarfile.TarInfo("app")
    folder.type, folder.mode = tarfile.DIRTYPE, 0o755
    archive = _tar(tmp_path, [(folder, None), (_file("app/main.py", 0o755), b"print(1)\n"),
                              (_file("app/.env"), b"X=1\n"), (_file("req.txt"), b"six\n")])
    context = tmp_path / "ctx"
    await unpack(archive, context, SANDBOX_ROOT, "app")
    assert (context / "app/main.py").read_text() == "print(1)\n"
    assert {(p.stat().st_uid, p.stat().st_gid) for p in (context, *context.rglob("*"))} \
        == {(SANDBOX_ROOT, SANDBOX_ROOT)}
    assert stat.S_IMODE((context / "app/main.py").stat().st_mode) == 0o755
    assert match(context, "app") == ["app"]
    assert match(context, "./req.txt") == ["req.txt"]
    assert match(context, "app/*") == ["app/.env", "app/main.py"]
    with pytest.raises(TemplateBuildError, match=r"no such file.*: missing\.txt"):
        match(context, "missing.txt")
    with pytest.raises(TemplateBuildError, match="inside the build context"):
        match(context, "../etc/passwd")


@pytest.mark.root
@pytest.mark.parametrize("member", ["absolute", "dotdot", "link-out", "device"])
async def test_unpack_refuses_what_leaves_the_tree(tmp_path: Path, member: str) -> None:
    """Absolute names, '..', links leading out and devices in an upload are refused."""
    if member == "absolute":
        bad = _file("/etc/evil")
    elif member == "dotdot":
        bad = _file("../evil")
    elif member == "link-out":
        bad = tarfile.TarInfo("link")
        bad.type, bad.linkname = tarfile.SYMTYPE, "/etc/shadow"
    else:
        bad = tarfile.TarInfo("null")
        bad.type, bad.devmajor, bad.devminor = tarfile.CHRTYPE, 1, 3
    archive = _tar(tmp_path, [(bad, b"x" if member in ("absolute", "dotdot") else None)])
    with pytest.raises(TemplateBuildError, match="refused"):
        await unpack(archive, tmp_path / "ctx", SANDBOX_ROOT, "x")
    assert not (tmp_path / "evil").exists()


@pytest.mark.root
async def test_unpack_names_a_broken_upload(tmp_path: Path) -> None:
    """An upload that is not a tar, or is missing, fails naming the COPY source."""
    junk = tmp_path / "junk"
    junk.write_bytes(b"not a tar at all" * 100)
    with pytest.raises(TemplateBuildError, match="COPY app: the upload is not a tar"):
        await unpack(junk, tmp_path / "ctx", SANDBOX_ROOT, "app")
    with pytest.raises(TemplateBuildError, match="COPY app: its files were not uploaded"):
        await unpack(tmp_path / "nothing", tmp_path / "ctx2", SANDBOX_ROOT, "app")


def test_layer_store_publishes_once_and_sweeps_leftovers(tmp_path: Path) -> None:
    """A published layer is whole; a second copy of the key is discarded; sweep removes
    temp dirs of dead builders only."""
    store = LayerStore(tmp_path / "layers")
    store.setup()
    work = store.new_work("k1")
    work.upper.mkdir()
    (work.upper / "f").write_text("one")
    info = store.publish(work, "Step 1/1: RUN x", {"home": "/root"})
    assert not info.empty and store.get("k1") == info
    assert not work.path.exists()
    again = store.new_work("k1")
    again.upper.mkdir()
    (again.upper / "f").write_text("two")
    assert store.publish(again, "dup", {}).step == "Step 1/1: RUN x"
    assert (store.diff("k1") / "f").read_text() == "one"
    empty = store.new_work("k2")
    assert store.publish(empty, "ENVish", {}).empty
    leftover = store.new_work("k3")
    held = store.new_work("k4")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl,os,sys; fd=os.open(sys.argv[1], os.O_RDWR|os.O_CREAT);"
         " fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()",
         str(store.root / ".locks" / "k4")], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        assert store.sweep() == 1
        assert not leftover.path.exists() and held.path.exists()
    finally:
        holder.communicate(b"")


async def test_layer_lock_serialises_builders(tmp_path: Path) -> None:
    """Two tasks locking one key run one after the other, and a cancelled waiter leaves
    the lock usable."""
    store = LayerStore(tmp_path / "layers")
    store.setup()
    order: list[str] = []
    first_in = asyncio.Event()
    release = asyncio.Event()

    async def hold(name: str) -> None:
        async with store.lock("k"):
            order.append(f"{name}+")
            first_in.set()
            await release.wait()
            order.append(f"{name}-")

    first = asyncio.create_task(hold("a"))
    await first_in.wait()
    second = asyncio.create_task(hold("b"))
    cancelled = asyncio.create_task(hold("c"))
    await asyncio.sleep(0)
    cancelled.cancel()
    release.set()
    await asyncio.gather(first, second)
    assert order == ["a+", "a-", "b+", "b-"]
    assert cancelled.cancelled()
    async with asyncio.timeout(5):
        async with store.lock("k"):
            pass


async def test_cancelled_waiter_never_holds_a_lock_file(tmp_path: Path) -> None:
    """A task waiting for a lock file another process holds, once cancelled, never
    enters and never keeps it: when that process lets go, the lock is free."""
    path = tmp_path / "k.lock"
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import fcntl,os,sys; fd=os.open(sys.argv[1], os.O_RDWR|os.O_CREAT);"
        " fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()",
        str(path), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    try:
        assert holder.stdout is not None and await holder.stdout.readline() == b"held\n"
        entered = False

        async def wait() -> None:
            nonlocal entered
            async with locked(path):
                entered = True

        task = asyncio.create_task(wait())
        await asyncio.sleep(0)  # the task runs until it waits for the lock
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        await holder.communicate(b"")
    free = asyncio.Event()
    loop = asyncio.get_running_loop()

    def take() -> None:
        fd = os.open(path, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.close(fd)
        loop.call_soon_threadsafe(free.set)

    # A daemon thread: were the lock leaked, it would block forever without holding up
    # the test run's exit.
    threading.Thread(target=take, daemon=True).start()
    async with asyncio.timeout(10):
        await free.wait()
    assert not entered


def test_manifest_round_trip_and_missing_parts(tmp_path: Path) -> None:
    """A manifest gives back the same template; a missing layer or manifest is
    TemplateNotFound."""
    rootfs = tmp_path / "templates/base/x/rootfs"
    layer = tmp_path / "layers/k1/diff"
    rootfs.mkdir(parents=True)
    layer.mkdir(parents=True)
    config = TemplateConfig(user="app", workdir="/srv", env=(("A", "1"),), start_cmd="run",
                            ready_cmd="true")
    built = make_built(config, rootfs, (layer,), True, tmp_path)
    write_manifest(built, tmp_path)
    assert read_manifest(built.digest, tmp_path) == built
    image = template_image(read_manifest(built.digest, tmp_path), "t1")
    assert image.layer_stack == (layer, rootfs)
    assert (image.default_user, image.default_workdir, image.env) == ("app", "/srv", (("A", "1"),))
    layer.rmdir()
    with pytest.raises(TemplateNotFound, match="layer"):
        template_image(read_manifest(built.digest, tmp_path), "t1")
    with pytest.raises(TemplateNotFound):
        read_manifest("0" * 32, tmp_path)
    with pytest.raises(TemplateNotFound):
        read_manifest("../../etc/passwd", tmp_path)


def test_run_step_key_ignores_nothing_that_matters() -> None:
    """The RUN user is part of the key."""
    state = BuildState()
    assert step_key("p", RunStep("id"), state) != step_key("p", RunStep("id", user="x"), state)


def test_glob_matches_like_the_sdk_without_following_links(tmp_path: Path) -> None:
    """``*`` stays in a segment, ``**`` spans any depth, dotfiles match, a matched dir's
    children are left to it, and a link loop is not walked."""
    for name in ("a.py", ".hidden.py", "src/b.py", "src/deep/c.py", "src/deep/d.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    (tmp_path / "src" / "loop").symlink_to(".")
    (tmp_path / "src" / "deep" / "loop").symlink_to("..")
    assert match(tmp_path, "*.py") == [".hidden.py", "a.py"]
    assert match(tmp_path, "**/*.py") == [".hidden.py", "a.py", "src/b.py", "src/deep/c.py"]
    assert match(tmp_path, "src/*") == ["src/b.py", "src/deep", "src/loop"]
    assert match(tmp_path, "s?c") == ["src"]
    assert match(tmp_path, "**") == [".hidden.py", "a.py", "src"]
