"""Saving a slot's processes to disk and bringing them back: runc + CRIU, one call each.

Both run inside the slot's pinned network namespace (see ``_restorable``) with a CRIU
configuration of their own (see ``_criu``). A dump is taken from a frozen cgroup: CRIU
then finds it frozen (instead of freezing it and polling every 100 ms) and the caller
can copy the files at exactly the moment the memory is saved.

Images live in a directory the caller chooses; CRIU's logs go to a separate work
directory, so images of a checkpoint are never written by a restore.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from bac_server.backends.base import CheckpointFailed

from ._context import Context
from ._criu import stdio_keys, write_dump_config, write_restore_config
from ._process import reap_if_child, start_time
from ._restorable import netns_pin
from ._slot import SlotRecord

_FREEZE_TIMEOUT_S = 10.0
_KEYS_FILE = "stdio-keys.json"


@dataclass(frozen=True)
class Images:
    """Where one dump's images and logs go."""

    images: Path
    work: Path

    def keys(self) -> dict[int, str]:
        raw = json.loads((self.images / _KEYS_FILE).read_text())
        return {int(fd): str(key) for fd, key in raw.items()}


def _image_dirs(where: Images, sandbox_gid: int) -> None:
    """Restored tasks read some images themselves (``tty-info.img``) as the sandbox's
    root, an unprivileged host uid: the images (and the directory holding them) are
    readable for the sandbox's gid, nobody else's. The caller makes the way there
    traversable the same way; logs stay root's."""
    where.work.mkdir(mode=0o700, parents=True, exist_ok=True)
    for directory, mode in ((where.images.parent, 0o710), (where.images, 0o750)):
        directory.mkdir(mode=mode, exist_ok=True)
        os.chown(directory, 0, sandbox_gid)
        directory.chmod(mode)


def freeze(ctx: Context, record: SlotRecord) -> bool:
    """Freeze the slot's cgroup and wait until every task is frozen; False if it already
    was (the caller then leaves it frozen)."""
    if ctx.cgroups.is_frozen(record.cgroup_path):
        return False
    ctx.cgroups.set_frozen(record.cgroup_path, True)
    deadline = time.monotonic() + _FREEZE_TIMEOUT_S
    # The v1 freezer has no change notification: poll its state (FREEZING -> FROZEN).
    while ctx.cgroups.read(record.cgroup_path, "freezer", "freezer.state") != "FROZEN":
        if time.monotonic() > deadline:
            ctx.cgroups.set_frozen(record.cgroup_path, False)
            raise CheckpointFailed(f"slot {record.slot}: cgroup did not freeze in "
                                   f"{_FREEZE_TIMEOUT_S:.0f} s")
        time.sleep(0.0005)
    return True


def thaw(ctx: Context, record: SlotRecord) -> None:
    ctx.cgroups.set_frozen(record.cgroup_path, False)


async def copy_tree(source: Path, target: Path) -> None:
    """Copy a layer with everything overlayfs keeps in it (owners, modes, xattrs such as
    ``trusted.overlay.opaque``, whiteout devices, hard links, sparse files); reflinks where
    the filesystem has them."""
    proc = await asyncio.create_subprocess_exec(
        "cp", "-a", "--reflink=auto", "--sparse=always", "--", f"{source}/.", str(target),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise CheckpointFailed(f"copying {source} failed: {err.decode(errors='replace')[-500:]}")


def _tail(path: Path, limit: int = 1500) -> str:
    with contextlib.suppress(OSError):
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - limit))
            return handle.read().decode(errors="replace").strip()
    return ""


def _criu_errors(log: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [line for line in log.read_text(errors="replace").splitlines()
                 if "Error" in line and "RLIMIT_NOFILE" not in line]
        return "\n".join(lines[-8:])
    return ""


async def _runc(ctx: Context, criu: str, record: SlotRecord, conf: Path, args: list[str], *,
                stdout: int | None = None) -> tuple[int, str]:
    paths = ctx.paths(record.slot)
    # SECURITY: nsenter moves only runc (and the CRIU it starts) into the sandbox's network
    # namespace, which the host owns; the server process itself never changes namespace.
    argv = ["nsenter", f"--net={netns_pin(paths)}", "--", ctx.runtime.binary,
            "--root", str(ctx.runtime.state_root), "--log", str(paths.runtime_log),
            "--criu", criu, *args]
    env = {**os.environ, "CRIU_CONFIG_FILE": str(conf)}
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=stdout if stdout is not None else asyncio.subprocess.DEVNULL,
        stderr=stdout if stdout is not None else asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    return proc.returncode or 0, (err or b"").decode(errors="replace")


async def dump(ctx: Context, criu: str, record: SlotRecord, where: Images, *,
               leave_running: bool) -> None:
    """Save the slot's processes (cgroup already frozen by the caller). Without
    ``leave_running`` they are gone afterwards and their memory is freed."""
    assert record.init_pid is not None
    _image_dirs(where, ctx.config.id_range.root)
    keys = stdio_keys(record.init_pid)
    (where.images / _KEYS_FILE).write_text(json.dumps(keys))
    conf = where.work / "dump.conf"
    write_dump_config(conf, keys)
    args = ["checkpoint", "--image-path", str(where.images), "--work-path", str(where.work),
            "--file-locks"]
    if leave_running:
        args.append("--leave-running")
    code, err = await _runc(ctx, criu, record, conf, [*args, record.slot])
    if code != 0:
        raise CheckpointFailed(f"checkpoint of slot {record.slot} failed: {err.strip()}\n"
                               f"{_criu_errors(where.work / 'dump.log')}")
    if not leave_running:
        # The server is the init's subreaper: collect it now, so no zombie stays behind.
        reap_if_child(record.init_pid)


async def restore(ctx: Context, criu: str, record: SlotRecord, where: Images) -> None:
    """Start the slot's container from ``where`` (bundle: the slot's config.json); the
    record learns the new init pid. On failure nothing of the attempt is left running."""
    paths = ctx.paths(record.slot)
    where.work.mkdir(mode=0o700, parents=True, exist_ok=True)
    conf = where.work / "restore.conf"
    write_restore_config(conf, where.keys())
    pid_file = where.work / "init.pid"
    pid_file.unlink(missing_ok=True)
    # CRIU reopens the inherited log through /proc as the sandbox's root (an unprivileged
    # host uid): that uid must be able to open it. It gains nothing: envd already holds
    # the file open for writing, and no path to it exists inside the sandbox.
    log = os.open(paths.envd_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        os.fchown(log, ctx.config.id_range.root, ctx.config.id_range.root)
        args = ["restore", "--detach", "--bundle", str(paths.root), "--image-path",
                str(where.images), "--work-path", str(where.work), "--file-locks",
                "--pid-file", str(pid_file)]
        code, _ = await _runc(ctx, criu, record, conf, [*args, record.slot], stdout=log)
    finally:
        os.close(log)
    if code != 0:
        with contextlib.suppress(Exception):
            await ctx.runtime.delete(record.slot)
        raise CheckpointFailed(f"restore of slot {record.slot} failed: {_tail(paths.envd_log, 600)}"
                               f"\n{_criu_errors(where.work / 'restore.log')}")
    pid = int(pid_file.read_text().strip())
    record.init_pid, record.init_start = pid, start_time(pid)
    paths.pid_file.write_text(f"{pid}\n")


def remove_images(where: Images) -> None:
    for directory in (where.images, where.work):
        shutil.rmtree(directory, ignore_errors=True)
