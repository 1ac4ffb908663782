"""Binding volumes into a running sandbox's mount namespace, from the host.

A sandbox's mounts are made by its runtime at start, but a sandbox from the ready pool or
a start snapshot is running before its create names its volumes; so every volume is bound
the same way, into the running sandbox: a short-lived child (``python -I -S``, the
standard library only) clones the volume's content directory as a detached mount
(``open_tree(OPEN_TREE_CLONE)``) in the host's namespace, enters the sandbox's mount
namespace (``setns`` needs a process of one thread: hence a child, not a thread), walks
the path from the sandbox's root one component at a time (``O_NOFOLLOW``: a symlink or a
file on the way is refused, so a path can only name a directory of the sandbox's own
tree, made and owned by its root when missing) and attaches the clone there
(``move_mount``). The mount keeps the host mount's nodev and nosuid.

The bind is then added to the slot's OCI config, where CRIU's dump names every bind as an
external mount (not saved) and its restore binds it again from the host path
(``checkpoint.criu._args``): a pause to disk and its resume keep the volume, live, and a
server restart changes nothing (the binds live in the sandbox's namespace). A start
afresh on the sandbox's files (a files-only pause's resume) writes a new config: the
binds recorded in the slot are made again after it (``rebind``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from bac_server.backends.base import VolumeMountFailed
from bac_server.cancel_safe import off_loop
from bac_server.host import write_private

from ..slots import Context, SlotRecord, save_record

_TIMEOUT_S = 10.0
_log = logging.getLogger(__name__)

# The child: argv[1] is {"pid", "owner", "binds": [[host dir, path], ...]}. Exits 0, or 3
# with one line for the caller (the path's problem, in the sandbox's terms).
_CHILD = r"""
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def fail(msg):
    sys.stderr.write(msg); sys.exit(3)
def check(result, what):
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, what + ": " + os.strerror(err))
    return result
args = json.loads(sys.argv[1])
owner = args["owner"]
trees = []
for host, path in args["binds"]:
    # SYS_open_tree 428: OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC; a detached copy of the bind.
    fd = check(libc.syscall(428, -100, host.encode(), 1 | 0o2000000), "open_tree " + host)
    trees.append((fd, path))
ns = os.open("/proc/%d/ns/mnt" % args["pid"], os.O_RDONLY | os.O_CLOEXEC)
check(libc.setns(ns, 0x20000), "setns")  # CLONE_NEWNS: root and cwd become the sandbox's
os.chdir("/")
for tree, path in trees:
    here = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    for name in [p for p in path.split("/") if p]:
        try:
            nxt = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                          dir_fd=here)
        except FileNotFoundError:
            try:
                os.mkdir(name, 0o755, dir_fd=here)
                os.chown(name, owner, owner, dir_fd=here, follow_symlinks=False)
            except FileExistsError:
                pass
            except OSError as exc:
                fail("cannot make %s in the sandbox: %s" % (path, exc.strerror))
            try:
                nxt = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                              dir_fd=here)
            except OSError as exc:
                fail("cannot reach %s in the sandbox: %s" % (path, exc.strerror))
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                fail("%s crosses a symlink or a file in the sandbox (%s): a volume is "
                     "mounted on a directory" % (path, name))
            fail("cannot reach %s in the sandbox: %s" % (path, exc.strerror))
        os.close(here)
        here = nxt
    mine, there = os.fstat(tree), os.fstat(here)
    if (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino):
        continue  # bound there already (a resume that kept its mounts)
    # SYS_move_mount 429: MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH
    check(libc.syscall(429, tree, b"", here, b"", 0x4 | 0x40), "move_mount " + path)
"""


def _config_binds(config: dict[str, object], binds: Sequence[tuple[str, str]]) -> bool:
    mounts = config.setdefault("mounts", [])
    assert isinstance(mounts, list)
    have = {m.get("destination") for m in mounts if isinstance(m, dict)}
    added = False
    for host, path in binds:
        if path not in have:
            mounts.append({"destination": path, "type": "bind", "source": host,
                           "options": ["rbind", "nosuid", "nodev"]})
            added = True
    return added


async def bind_volumes(ctx: Context, record: SlotRecord,
                       binds: Sequence[tuple[str, str]]) -> None:
    """Bind each (host dir, path) into the slot's running sandbox; record them in the slot
    (for ``rebind``) and its OCI config (for CRIU). ``VolumeMountFailed`` names a path
    that cannot take one."""
    if record.init_pid is None:
        raise VolumeMountFailed("the sandbox has no running processes to mount volumes into")
    argv = [sys.executable, "-I", "-S", "-c", _CHILD,
            json.dumps({"pid": record.init_pid, "owner": ctx.config.id_range.root,
                        "binds": [list(b) for b in binds]})]
    # SECURITY: root enters the sandbox's mount namespace only to attach a clone of the
    # volume's own directory; every path component inside is opened without following a
    # link, so the sandbox's files can only ever name a directory of its own tree.
    child = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE)
    try:
        _, err = await asyncio.wait_for(child.communicate(), _TIMEOUT_S)
    except BaseException:
        if child.returncode is None:
            child.kill()
            await child.wait()
        raise
    message = err.decode(errors="replace").strip()
    if child.returncode == 3:
        raise VolumeMountFailed(message)
    if child.returncode != 0:
        # Host-side detail (paths, a traceback) for the log, not for the caller.
        _log.error("binding volumes into slot %s failed (exit %s): %s", record.slot,
                   child.returncode, message[-500:])
        raise VolumeMountFailed("the volumes could not be mounted (the server's log says why)")
    paths = ctx.paths(record.slot)

    def remember() -> None:
        known = {tuple(v) for v in record.volumes}
        record.volumes.extend([list(b) for b in binds if tuple(b) not in known])
        save_record(paths, record)
        config = json.loads(paths.config.read_text())
        if _config_binds(config, binds):
            write_private(paths.config, json.dumps(config))

    await off_loop(remember)


async def rebind(ctx: Context, record: SlotRecord) -> None:
    """Bind the slot's recorded volumes again (its processes were started afresh)."""
    if record.volumes:
        await bind_volumes(ctx, record, [(str(Path(h)), p) for h, p in record.volumes])
