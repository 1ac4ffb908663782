"""Who may reach what in the data directory: its modes, checked and repaired at each start.

The data directory holds the store (every sandbox's record), the store key, the first API
key, templates, imported images, uploaded build contexts, checkpoints with their memory
images, and each sandbox's files. The rule is root alone, except for the way the
sandboxes' runtime must go: the OCI runtime and CRIU's restored tasks run inside a
sandbox's user namespace as its root, an unprivileged host uid of the sandbox range, and
must traverse the data dir to the slot (its rootfs mount, /etc files, /dev), the envd
bundle (bound at /opt/bac) and, while a restore runs, the images::

    <data>/                          0710 root:<sandbox root gid>   other users cannot enter
    sandboxes/ checkpoints/ envd/    0710 root:<sandbox root gid>
    volumes/                         0710 root:<sandbox root gid>  (CRIU binds them back)
    bac.db  -wal -shm -journal       0600 root
    first-api-key                    0600 root
    keys/                            0700 root   (store.key 0600)
    every other entry Bac makes      0700 root

Templates, layers and images need no way in: overlayfs reaches its layers with the
credentials of whoever mounted it (root). Inside slots and checkpoints the backend keeps
the same rule at a finer grain (``backends.namespaces.slots._files``).

:func:`secure_data_dir` runs at every start, before the store opens. It makes the
directory when it is missing and repairs modes and group owners that differ from the
table (what an older server or an operator left open: readable is repaired, the secrets
already read cannot be). It refuses to start, with one line naming the path, where a
repair would not make it safe: the directory or an entry is a symlink, of the wrong
kind, owned by another user, or was writable by others (who may have changed anything
in it); so is a way to the directory that another user could rename. Entries it does
not know (an operator's own files) are left alone. A server running as another user than
root (an API replica) is held to the same table with its own user and group for root's.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ._errors import UnsafeDataDir
from ._paths import IdRange

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Entry:
    """A path in the data dir and how it must be: kind, mode, and whether its group is
    the sandboxes' root gid (else root's)."""

    name: str
    directory: bool
    mode: int
    sandbox_group: bool = False


DATA_DIR = Entry(".", True, 0o710, sandbox_group=True)
ENTRIES: tuple[Entry, ...] = (
    *(Entry(f"bac.db{suffix}", False, 0o600) for suffix in ("", "-wal", "-shm", "-journal")),
    Entry("first-api-key", False, 0o600),
    Entry("keys", True, 0o700),
    Entry("keys/store.key", False, 0o600),
    *(Entry(name, True, 0o710, sandbox_group=True)
      for name in ("sandboxes", "checkpoints", "envd", "volumes")),
    *(Entry(name, True, 0o700)
      for name in ("templates", "layers", "images", "imports", "cache", "template-uploads",
                   "start-snapshots", "artefacts", "claims", ".discard")),
)
_NO_FOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def secure_data_dir(data_dir: Path, ids: IdRange) -> list[str]:
    """Make ``data_dir`` private (creating it when missing) and check its known entries;
    returns what was repaired, one line each. Raises :class:`UnsafeDataDir`."""
    data_dir = Path(os.path.abspath(data_dir))
    _check_ancestors(data_dir)
    if not os.path.lexists(data_dir):
        data_dir.mkdir(mode=0o700, parents=True)
        os.chown(data_dir, -1, _group(DATA_DIR, ids))
        os.chmod(data_dir, DATA_DIR.mode)
    try:
        root_fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY | _NO_FOLLOW)
    except OSError as exc:
        raise UnsafeDataDir(f"data directory {data_dir} is not a directory (a symlink? point "
                            f"BAC_DATA_DIR at the real directory): {exc.strerror}") from exc
    repaired: list[str] = []
    try:
        _secure(root_fd, data_dir, DATA_DIR, ids, repaired)
        for entry in ENTRIES:
            _secure_entry(root_fd, data_dir, entry, ids, repaired)
    finally:
        os.close(root_fd)
    for line in repaired:
        _log.warning("data directory: %s", line)
    return repaired


def _check_ancestors(data_dir: Path) -> None:
    # SECURITY: whoever may rename a directory on the way can swap the data dir for theirs.
    for parent in data_dir.parents:
        try:
            st = os.stat(parent)
        except FileNotFoundError:
            continue  # made below, by us
        writable = st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX
        if st.st_uid not in (0, os.geteuid()) or writable:
            raise UnsafeDataDir(
                f"data directory {data_dir} lies in {parent}, which another user can change "
                f"(owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}); move it")


def _group(entry: Entry, ids: IdRange) -> int:
    """The group an entry must have. A server not running as root (an API replica, which
    runs no sandbox: docs/scale-out.md) keeps its own group everywhere: nothing of the
    sandboxes' id range needs a way in, and it could not give one."""
    if os.geteuid() != 0:
        return os.getegid()
    return ids.root if entry.sandbox_group else 0


def _secure_entry(root_fd: int, data_dir: Path, entry: Entry, ids: IdRange,
                  repaired: list[str]) -> None:
    *parents, name = entry.name.split("/")
    dir_fd = root_fd
    try:
        for part in parents:  # every parent is itself an entry, already checked
            try:
                fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | _NO_FOLLOW, dir_fd=dir_fd)
            except (FileNotFoundError, NotADirectoryError):
                return
            if dir_fd != root_fd:
                os.close(dir_fd)
            dir_fd = fd
        try:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        _secure(dir_fd, data_dir / entry.name, entry, ids, repaired, name=name)
    finally:
        if dir_fd != root_fd:
            os.close(dir_fd)


def _secure(dir_fd: int, path: Path, entry: Entry, ids: IdRange, repaired: list[str],
            name: str = ".") -> None:
    """Check one path (``name`` in ``dir_fd``) and repair its mode and group."""
    before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    kind = "directory" if entry.directory else "file"
    if stat.S_ISLNK(before.st_mode):
        raise UnsafeDataDir(f"{path} is a symlink; Bac makes it a {kind}: remove it")
    if not (stat.S_ISDIR(before.st_mode) if entry.directory else stat.S_ISREG(before.st_mode)):
        raise UnsafeDataDir(f"{path} is not a {kind}: move it away")
    if before.st_uid != os.geteuid():
        raise UnsafeDataDir(f"{path} belongs to uid {before.st_uid}, not to the server's "
                            "user: its owner may have changed what is in it; check it, "
                            "then chown it back")
    if before.st_mode & 0o022:
        raise UnsafeDataDir(f"{path} was writable by others (mode "
                            f"{stat.S_IMODE(before.st_mode):o}): its content may have been "
                            "changed; check it, then chmod it")
    # O_PATH: closing a real descriptor of bac.db or its WAL would drop every POSIX lock
    # SQLite holds on it in this process (the backend checks again with the store open).
    fd = os.open(name, os.O_PATH | _NO_FOLLOW, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise UnsafeDataDir(f"{path} changed while it was checked: start again")
        pinned = f"/proc/self/fd/{fd}"  # the inode just checked, whatever the path does
        gid = _group(entry, ids)
        if st.st_gid != gid:
            # SECURITY: a root-owned entry of ours; only its group changes, to the one
            # that may (sandbox root gid) or must not (root) traverse it.
            os.chown(pinned, -1, gid)
            repaired.append(f"{path}: group {st.st_gid} -> {gid}")
        if stat.S_IMODE(st.st_mode) != entry.mode:
            os.chmod(pinned, entry.mode)
            repaired.append(f"{path}: mode {stat.S_IMODE(st.st_mode):o} -> {entry.mode:o}")
    finally:
        os.close(fd)
