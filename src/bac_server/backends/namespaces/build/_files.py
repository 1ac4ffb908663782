"""A build slot's files on the host: its directories, the step's layer, binds, stubs.

Permissions follow the slot rule of ``slots._files``: the runtime, already inside the
sandbox's user namespace, traverses the slot directory (group = sandbox root gid, 0710);
nobody else may. ``upper`` becomes the sandbox's "/", so it is owned by sandbox root.

*Stubs*: the runtime makes a mount point for every bind (and for /etc/hosts and the
like) that the layers lack. Those empty files and directories would otherwise end up in
the step's layer; ``remove_stubs`` takes out the ones still empty afterwards.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path, PurePosixPath

from bac_server.backends.base import BuildStep
from bac_server.host._syscalls import MS_BIND, MS_NODEV, MS_NOSUID, MS_RDONLY, mount

from ..layers import find_in_layers, mount_overlay
from ..slots import Context, SlotRecord, save_record, write_identity, write_resolv_conf

# The upper directory must be a layer on its own: no redirects to lower directories, no
# metadata-only copies that need the lower file's data, no index tied to these lowers.
LAYER_OPTIONS = ("index=off", "metacopy=off", "redirect_dir=off")
_MS_REMOUNT = 0x20
# Mount points every sandbox gets besides the step's binds.
_RUNTIME_MOUNTS = ("/proc", "/dev", "/sys", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf")


def _bind_read_only(source: Path, target: Path) -> None:
    fd = os.open(source, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        kind = os.fstat(fd).st_mode
        if stat.S_ISDIR(kind):
            target.mkdir(mode=0o700)
        elif stat.S_ISREG(kind):
            target.touch(mode=0o600)
        else:
            raise ValueError(f"bind source {source} is neither a directory nor a file")
        # SECURITY: the step sees the source read-only, without setuid or device files,
        # and without anything mounted below it (no MS_REC); the fd pins what was checked.
        mount(f"/proc/self/fd/{fd}", str(target), None, MS_BIND, None)
        mount("none", str(target), None,
              _MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
    finally:
        os.close(fd)


def _own_dir(path: Path, mode: int, uid: int, gid: int) -> None:
    path.mkdir(mode=mode)
    os.chown(path, uid, gid)
    os.chmod(path, mode)


def lay_out(ctx: Context, record: SlotRecord, step: BuildStep, hostname: str) -> None:
    """Directories, /etc files, the overlay and the binds (blocking; record saved first)."""
    paths = ctx.paths(record.slot)
    ids = ctx.config.id_range
    paths.root.mkdir(mode=0o710)  # fails if the slot exists: slot names are unique
    os.chown(paths.root, 0, ids.root)
    save_record(paths, record)
    assert record.work_dir is not None
    work = Path(record.work_dir)
    _own_dir(step.upper, 0o755, ids.root, ids.root)  # fails if it exists
    _own_dir(work, 0o700, 0, 0)
    _own_dir(paths.rootfs, 0o755, 0, 0)
    _own_dir(paths.etc, 0o710, 0, ids.root)
    _own_dir(paths.binds, 0o710, 0, ids.root)
    write_identity(paths, hostname, ids)
    write_resolv_conf(paths, record.host_address, ids)
    mount_overlay(paths.rootfs, step.lowers, step.upper, work, LAYER_OPTIONS)
    for index, (source, _dest) in enumerate(step.binds):
        _bind_read_only(source, paths.binds / str(index))


def missing_paths(step: BuildStep) -> list[str]:
    """Mount points (and their parents) the runtime will have to make in ``upper``."""
    missing: set[str] = set()
    for dest in (*_RUNTIME_MOUNTS, *(d for _, d in step.binds)):
        parts = PurePosixPath(dest).parts[1:]
        for depth in range(1, len(parts) + 1):
            relative = "/".join(parts[:depth])
            if find_in_layers(step.lowers, relative) is None:
                missing.update("/".join(parts[:d]) for d in range(depth, len(parts) + 1))
                break
    return sorted(missing)


def _remove_if_empty(upper_fd: int, relative: str) -> None:
    parts = relative.split("/")
    parent = os.dup(upper_fd)
    try:
        for part in parts[:-1]:
            # SECURITY: ``upper`` was written by the step: never follow its links.
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                            dir_fd=parent)
            os.close(parent)
            parent = child
        found = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        if stat.S_ISDIR(found.st_mode):
            os.rmdir(parts[-1], dir_fd=parent)  # fails unless empty
        elif stat.S_ISREG(found.st_mode) and found.st_size == 0:
            os.unlink(parts[-1], dir_fd=parent)
    finally:
        os.close(parent)


def remove_stubs(upper: Path, stubs: list[str]) -> None:
    """Remove the stubs that are still empty, deepest first (blocking)."""
    if not stubs:
        return
    upper_fd = os.open(upper, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for relative in sorted(stubs, key=lambda p: p.count("/"), reverse=True):
            with contextlib.suppress(OSError):
                _remove_if_empty(upper_fd, relative)
    finally:
        os.close(upper_fd)
