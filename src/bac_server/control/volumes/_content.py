"""A volume's content, read and written by the host for the content API, confined to it.

The volume's files are the sandboxes': any of them may have put a symlink anywhere
(``ln -s /etc /data/x``, ``ln -s ../../.. up``). The server works on them as the host's
root, so no path is ever resolved the ordinary way. Every call starts from the volume's
directory fd and:

* resolves the *parent* of the entry with ``openat2`` and ``RESOLVE_IN_ROOT`` (plus no
  magic links, no mount crossing): the kernel resolves ``..`` and every symlink as if the
  volume were ``/``, so whatever the tree holds, the result is a directory inside it;
* acts on the entry itself by name relative to that fd, never following it
  (``O_NOFOLLOW``, ``AT_SYMLINK_NOFOLLOW``, ``rmtree`` on fds): a symlink is stat'ed,
  listed, chowned or removed as a link, and writing through one is refused.

The path a caller gives is made absolute and normalised first (``..`` stops at the top),
and is what the answers show. Owners are the sandboxes' ids (0..65535, what ``ls -n``
shows inside), shifted into the host's sandbox range here: a file written through the
API with ``uid=1000`` belongs to the sandboxes' ``user``. Every function blocks: call
them off the event loop.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import secrets
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bac_server.host import IdRange
from bac_server.host._syscalls import (
    RESOLVE_NO_MAGICLINKS,
    RESOLVE_NO_XDEV,
    openat2,
)

from ..errors import Conflict, InvalidRequest, NotFound, QuotaExceeded

RESOLVE_IN_ROOT = 0x10
_SCOPED = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
MAX_PATH = 4096
MAX_DEPTH = 64
# Owners of what the API makes when the request names none: the sandboxes' default user.
DEFAULT_UID = 1000
_NOBODY = 65534


@dataclass(frozen=True)
class EntryStat:
    """E2B's ``VolumeEntryStat``."""

    name: str
    type: str  # directory | file | symlink | unknown
    path: str  # absolute in the volume
    size: int
    mode: int  # permission bits (and setuid/setgid/sticky)
    uid: int  # the sandboxes' ids
    gid: int
    atime: datetime
    mtime: datetime
    ctime: datetime
    target: str | None = None  # a symlink's target, as written


def normalize(path: str) -> str:
    """The path made absolute in the volume, ``..`` and ``.`` folded (never above the
    top); 400 for an empty one, a NUL or one too long."""
    if not path or "\x00" in path or len(path) > MAX_PATH:
        raise InvalidRequest("path must be 1 to 4096 characters without NUL")
    return posixpath.normpath("/" + path.lstrip("/")).replace("//", "/")


def failure(exc: OSError, path: str = "the path") -> Exception:
    """The control plane's error for a file system failure on ``path``."""
    return _failed(exc, path)


def _failed(exc: OSError, path: str) -> Exception:
    code = exc.errno
    if code in (errno.ENOENT,):
        return NotFound(f"path {path} not found")
    if code in (errno.ENOSPC, errno.EDQUOT):
        return QuotaExceeded(f"the volume is full ({path})")
    if code == errno.EEXIST:
        return Conflict(f"{path} exists")
    if code == errno.ENOTEMPTY:
        return Conflict(f"{path} is not empty")
    if code in (errno.ENOTDIR,):
        return InvalidRequest(f"{path}: a part of it is not a directory")
    if code == errno.EISDIR:
        return InvalidRequest(f"{path} is a directory")
    if code in (errno.ELOOP, errno.EXDEV):
        return InvalidRequest(f"{path} is a symlink, or resolves through too many")
    if code in (errno.ENAMETOOLONG, errno.EINVAL):
        return InvalidRequest(f"{path}: {os.strerror(code)}")
    return InvalidRequest(f"{path}: {os.strerror(code or errno.EIO)}")


class VolumeContent:
    """One volume's directory, with the id range its owners are shifted by."""

    def __init__(self, root: Path, ids: IdRange) -> None:
        self._root = root
        self._ids = ids

    # -- resolving -----------------------------------------------------------------------

    @contextlib.contextmanager
    def _top(self) -> Iterator[int]:
        fd = os.open(self._root, _DIR | os.O_NOFOLLOW)
        try:
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _parent(self, path: str, *, make: bool = False,
                owner: tuple[int, int] | None = None) -> Iterator[tuple[int, str]]:
        """(fd of the entry's directory, its name); ``make``: missing directories on the
        way are made (owned ``owner``), one at a time, confined like the rest."""
        parent, name = posixpath.split(path)
        with self._top() as top:
            try:
                if make:
                    fd = self._make_dirs(top, parent, owner)
                else:
                    fd = openat2(top, parent.lstrip("/") or ".", _DIR, resolve=_SCOPED)
            except OSError as exc:
                raise _failed(exc, path) from exc
            try:
                yield fd, name
            finally:
                os.close(fd)

    def _make_dirs(self, top: int, parent: str, owner: tuple[int, int] | None) -> int:
        fd = os.dup(top)
        for part in [p for p in parent.split("/") if p]:
            try:
                nxt = openat2(fd, part, _DIR, resolve=_SCOPED)
            except FileNotFoundError:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                    uid, gid = owner or self._host_ids(None, None)
                    os.chown(part, uid, gid, dir_fd=fd, follow_symlinks=False)
                except FileExistsError:
                    pass
                except OSError:
                    os.close(fd)
                    raise
                try:
                    nxt = openat2(fd, part, _DIR, resolve=_SCOPED)
                except OSError:
                    os.close(fd)
                    raise
            except OSError:
                os.close(fd)
                raise
            os.close(fd)
            fd = nxt
        return fd

    def _host_ids(self, uid: int | None, gid: int | None) -> tuple[int, int]:
        for value, what in ((uid, "uid"), (gid, "gid")):
            if value is not None and not 0 <= value < self._ids.size:
                raise InvalidRequest(f"{what} must be 0..{self._ids.size - 1}, not {value}")
        uid = DEFAULT_UID if uid is None else uid
        gid = uid if gid is None else gid
        return self._ids.root + uid, self._ids.root + gid

    def _inside(self, host_id: int) -> int:
        inside = host_id - self._ids.root
        return inside if 0 <= inside < self._ids.size else _NOBODY

    def _entry(self, fd: int, name: str, path: str) -> EntryStat:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        kind = "unknown"
        target = None
        if stat.S_ISDIR(st.st_mode):
            kind = "directory"
        elif stat.S_ISREG(st.st_mode):
            kind = "file"
        elif stat.S_ISLNK(st.st_mode):
            kind = "symlink"
            target = os.readlink(name, dir_fd=fd)
        return EntryStat(
            name=posixpath.basename(path) or "/", type=kind, path=path, size=st.st_size,
            mode=stat.S_IMODE(st.st_mode), uid=self._inside(st.st_uid),
            gid=self._inside(st.st_gid),
            atime=datetime.fromtimestamp(st.st_atime, UTC),
            mtime=datetime.fromtimestamp(st.st_mtime, UTC),
            ctime=datetime.fromtimestamp(st.st_ctime, UTC), target=target)

    # -- operations ----------------------------------------------------------------------

    def stat(self, path: str) -> EntryStat:
        path = normalize(path)
        if path == "/":
            with self._top() as top:
                return self._entry(top, ".", "/")
        with self._parent(path) as (fd, name):
            try:
                return self._entry(fd, name, path)
            except OSError as exc:
                raise _failed(exc, path) from exc

    def listing(self, path: str, depth: int = 1) -> list[EntryStat]:
        path = normalize(path)
        if not 1 <= depth <= MAX_DEPTH:
            raise InvalidRequest(f"depth must be 1..{MAX_DEPTH}, not {depth}")
        with self._top() as top:
            try:
                fd = openat2(top, path.lstrip("/") or ".", _DIR, resolve=_SCOPED)
            except OSError as exc:
                raise _failed(exc, path) from exc
            try:
                found: list[EntryStat] = []
                self._walk(fd, path, depth, found)
                return found
            except OSError as exc:
                raise _failed(exc, path) from exc
            finally:
                os.close(fd)

    def _walk(self, fd: int, path: str, depth: int, found: list[EntryStat]) -> None:
        for name in sorted(os.listdir(fd)):
            child = posixpath.join(path, name)
            try:
                entry = self._entry(fd, name, child)
            except FileNotFoundError:
                continue  # removed meanwhile
            found.append(entry)
            if entry.type == "directory" and depth > 1:
                try:
                    sub = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
                except OSError:
                    continue
                try:
                    self._walk(sub, child, depth - 1, found)
                finally:
                    os.close(sub)

    def make_dir(self, path: str, *, uid: int | None, gid: int | None, mode: int | None,
                 force: bool) -> EntryStat:
        """``force``: missing parents are made, and a directory already there is fine."""
        path = normalize(path)
        owner = self._host_ids(uid, gid)
        mode = _mode(mode, 0o755)
        if path == "/":
            if force:
                return self.stat(path)
            raise Conflict("/ exists")
        with self._parent(path, make=force, owner=owner) as (fd, name):
            try:
                os.mkdir(name, 0o700, dir_fd=fd)
            except FileExistsError:
                if force and stat.S_ISDIR(os.stat(name, dir_fd=fd,
                                                  follow_symlinks=False).st_mode):
                    return self._entry(fd, name, path)
                raise Conflict(f"{path} exists") from None
            except OSError as exc:
                raise _failed(exc, path) from exc
            self._own(fd, name, owner, mode, path)
            return self._entry(fd, name, path)

    def _own(self, fd: int, name: str, owner: tuple[int, int], mode: int, path: str) -> None:
        try:
            entry = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                            dir_fd=fd)
        except OSError as exc:
            raise _failed(exc, path) from exc
        try:
            os.fchown(entry, *owner)
            os.fchmod(entry, mode)
        except OSError as exc:
            raise _failed(exc, path) from exc
        finally:
            os.close(entry)

    def open_write(self, path: str, *, uid: int | None, gid: int | None,
                   mode: int | None) -> Upload:
        """A new file beside ``path``'s (missing parents made) that ``Upload.publish``
        renames over it: a reader never sees half a file, and a symlink at ``path`` is
        replaced, never written through."""
        path = normalize(path)
        if path == "/":
            raise InvalidRequest("/ is a directory")
        owner = self._host_ids(uid, gid)
        mode = _mode(mode, 0o644)
        with self._parent(path, make=True, owner=self._host_ids(uid, gid)) as (fd, name):
            parent = os.dup(fd)
        temp = f".{name[:200]}.bac-{secrets.token_hex(6)}"
        try:
            out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                          | os.O_CLOEXEC, 0o600, dir_fd=parent)
            os.fchown(out, *owner)
            os.fchmod(out, mode)
        except OSError as exc:
            os.close(parent)
            raise _failed(exc, path) from exc
        return Upload(self, parent, name, temp, out, path)

    def open_read(self, path: str) -> tuple[int, int]:
        """(fd, size) of the regular file at ``path`` (a symlink inside the volume is
        followed, inside it)."""
        path = normalize(path)
        with self._top() as top:
            try:
                fd = openat2(top, path.lstrip("/") or ".",
                             os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC, resolve=_SCOPED)
            except OSError as exc:
                raise _failed(exc, path) from exc
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise InvalidRequest(f"{path} is not a file")
        return fd, st.st_size

    def remove(self, path: str) -> None:
        path = normalize(path)
        if path == "/":
            raise InvalidRequest("the volume's top cannot be removed")
        with self._parent(path) as (fd, name):
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    # fd-relative all the way down, never following a link.
                    shutil.rmtree(name, dir_fd=fd)
                else:
                    os.unlink(name, dir_fd=fd)
            except OSError as exc:
                raise _failed(exc, path) from exc

    def update(self, path: str, *, uid: int | None, gid: int | None,
               mode: int | None) -> EntryStat:
        path = normalize(path)
        with (self._top() if path == "/" else self._parent(path)) as opened:
            fd, name = (opened, ".") if isinstance(opened, int) else opened
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError as exc:
                raise _failed(exc, path) from exc
            if uid is not None or gid is not None:
                inside_uid = self._inside(st.st_uid) if uid is None else uid
                inside_gid = self._inside(st.st_gid) if gid is None else gid
                owner = self._host_ids(inside_uid, inside_gid)
                os.chown(name, *owner, dir_fd=fd, follow_symlinks=False)
            if mode is not None:
                if stat.S_ISLNK(st.st_mode):
                    raise InvalidRequest(f"{path} is a symlink: it has no mode of its own")
                entry = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                                | os.O_CLOEXEC, dir_fd=fd)
                try:
                    os.fchmod(entry, _mode(mode, 0))
                finally:
                    os.close(entry)
            return self._entry(fd, name, path)


def _mode(mode: int | None, default: int) -> int:
    if mode is None:
        return default
    if not 0 <= mode <= 0o7777:
        raise InvalidRequest(f"mode must be 0..0o7777 (4095), not {mode}")
    return mode


class Upload:
    """A file being written: ``write`` its chunks, then ``publish`` it or ``discard`` it."""

    def __init__(self, content: VolumeContent, parent: int, name: str, temp: str, fd: int,
                 path: str) -> None:
        self._content = content
        self._parent = parent
        self._name = name
        self._temp = temp
        self._fd = fd
        self.path = path

    def write(self, chunk: bytes) -> None:
        view = memoryview(chunk)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            raise _failed(exc, self.path) from exc

    def publish(self) -> EntryStat:
        try:
            os.close(self._fd)
            self._fd = -1
            os.rename(self._temp, self._name, src_dir_fd=self._parent,
                      dst_dir_fd=self._parent)
        except OSError as exc:
            self.discard()
            raise _failed(exc, self.path) from exc
        try:
            return self._content._entry(self._parent, self._name, self.path)
        finally:
            self._close()

    def discard(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        with contextlib.suppress(OSError):
            os.unlink(self._temp, dir_fd=self._parent)
        self._close()

    def _close(self) -> None:
        if self._parent >= 0:
            os.close(self._parent)
            self._parent = -1
