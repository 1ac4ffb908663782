"""Unpacking a COPY step's upload (a tenant's tar) without letting a name in it reach the host.

tarfile's own extraction decides where an entry lands with ``os.path.realpath``, which
gives up past ``PATH_MAX`` and goes on lexically while the kernel resolves for real
(CVE-2025-4517 and its kin): run as root, a crafted upload wrote anywhere on the host.
Here tarfile only parses the stream; nothing is extracted by it.

:func:`unpack_upload` (the server's side) makes the target directory, opens it and the
upload, and starts this file as a child (``python -I <this file>``, the two fds passed,
no ``preexec_fn``: safe from a threaded server). The child (:func:`main`) drops to the
sandbox-root host uid with no groups and no capabilities, bounds its own CPU time,
memory, file size and open files, and only then reads a byte of the upload. It makes
every entry itself, relative to the target's fd, through ``openat2`` with
``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV``: the
kernel refuses a resolution that would leave the tree, cross a mount or pass through a
symbolic link, and were it ever to surprise, the child's uid owns no host file of root's.
The server bounds the child's wall time.

What an upload may hold (what the SDKs send): regular files (their mode without setuid,
setgid, sticky and group/other write, owner read/write added: tarfile's ``data`` filter),
directories (0755), and symbolic links whose target, read from where the link is, stays
in the tree. A link is made, never traversed: a later entry whose path goes through one
is refused. A later file or link replaces an earlier file or link of the same name;
nothing replaces a directory and no directory replaces anything else. No hard links,
devices, FIFOs, absolute names or ``..``. Every entry is owned by the child's uid.

One module past 400 lines: the child runs this very file as a script, so the server's
half (the job it hands over, the outcome it reads back) and the child's half, which
speak only to each other, stay together.
"""

from __future__ import annotations

import asyncio
import errno
import json
import lzma
import os
import posixpath
import resource
import signal
import stat
import sys
import tarfile
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from bac_server.cancel_safe import end_child
from bac_server.host._syscalls import openat2

Kind = Literal["ok", "refused", "not-a-tar", "disk-full", "failed"]
NAME_MAX_BYTES = 4095  # PATH_MAX without its NUL: longer names no tool in the image could use
_COMPONENT_MAX_BYTES = 255
_ENTRY_COST = 4096  # what a directory entry and inode cost the disk, about
_CHUNK = 1 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# What a corrupt upload makes tarfile and its decompressors raise.
_PARSE_ERRORS = (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError, ValueError,
                 MemoryError)


@dataclass(frozen=True)
class Limits:
    """Bounds of one unpacking (the disk's free space bounds the bytes)."""

    entries: int = 1_000_000
    cpu_seconds: int = 300
    wall_seconds: float = 600.0
    memory_bytes: int = 1 << 30


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Outcome:
    kind: Kind
    message: str = ""


@dataclass(frozen=True)
class _Job:
    """What the child is told, as one JSON argument."""

    archive_fd: int
    dir_fd: int
    uid: int
    entries: int
    budget: int  # bytes the files may take, entries included
    cpu_seconds: int
    memory_bytes: int


# -- the server's side ------------------------------------------------------------------


async def unpack_upload(archive: Path, into: Path, uid: int,
                        limits: Limits = DEFAULT_LIMITS) -> Outcome:
    """Unpack ``archive`` into ``into`` (made here, owned by ``uid``) in an unprivileged
    child; raises ``FileNotFoundError`` when the archive is missing."""
    if uid < 1:
        raise ValueError(f"uploads are never unpacked as uid {uid}")
    archive_fd = os.open(archive, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        dir_fd = _make_target(into, uid)
        try:
            disk = os.fstatvfs(dir_fd)
            job = _Job(archive_fd=archive_fd, dir_fd=dir_fd, uid=uid, entries=limits.entries,
                       budget=disk.f_bavail * disk.f_frsize, cpu_seconds=limits.cpu_seconds,
                       memory_bytes=limits.memory_bytes)
            return await _run_child(job, limits.wall_seconds)
        finally:
            os.close(dir_fd)
    finally:
        os.close(archive_fd)


def _make_target(into: Path, uid: int) -> int:
    os.mkdir(into, 0o700)
    fd = os.open(into, _DIR_FLAGS | os.O_NOFOLLOW)
    try:
        # SECURITY: a directory just made by the server in its private scratch directory
        # goes to the sandbox-root uid, which the child runs as and fills.
        os.fchown(fd, uid, uid)
    except BaseException:
        os.close(fd)
        raise
    return fd


async def _run_child(job: _Job, wall_seconds: float) -> Outcome:
    if not sys.executable:
        raise RuntimeError("no Python interpreter to unpack uploads with")
    proc = await asyncio.create_subprocess_exec(
        # SECURITY: the child starts as root only to drop to ``job.uid`` before it reads
        # the upload (main); -I keeps the environment and working directory out of it.
        sys.executable, "-I", __file__, json.dumps(asdict(job)),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, pass_fds=(job.archive_fd, job.dir_fd),
        env={"LANG": "C.UTF-8"}, cwd="/")
    try:
        out, err = await asyncio.wait_for(proc.communicate(), wall_seconds)
    except TimeoutError:
        await end_child(proc)
        return Outcome("failed", f"it took longer than {wall_seconds:.0f}s")
    except BaseException:
        await end_child(proc)
        raise
    return _outcome(proc.returncode, out, err, job)


def _outcome(code: int | None, out: bytes, err: bytes, job: _Job) -> Outcome:
    if code == 0:
        try:
            raw = json.loads(out.decode().strip().splitlines()[-1])
            return Outcome(raw["kind"], str(raw.get("message", "")))
        except (ValueError, IndexError, KeyError, TypeError):
            pass
    if code == -signal.SIGXCPU:
        return Outcome("failed", f"it used more than {job.cpu_seconds}s of CPU time")
    if code == -signal.SIGXFSZ:
        return Outcome("disk-full", "a file is larger than the free space")
    last = (err.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
    how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit {code}"
    return Outcome("failed", f"the unpacker failed ({how}: {last[-300:]})")


# -- the child's side -------------------------------------------------------------------


class _Refused(Exception):
    """An entry the upload may not hold; the message says why."""


class _NotATar(Exception):
    """The upload does not parse as a tar (or tar.gz) archive."""


class _DiskFull(Exception):
    """The files would not fit on the disk."""


def main(argv: list[str]) -> int:
    job = _Job(**json.loads(argv[0]))
    _drop_privileges(job.uid)
    _bound(job)
    try:
        count = _unpack(job)
    except _Refused as exc:
        result = Outcome("refused", str(exc))
    except _NotATar as exc:
        result = Outcome("not-a-tar", str(exc))
    except _DiskFull as exc:
        result = Outcome("disk-full", str(exc))
    else:
        result = Outcome("ok", f"{count} entries")
    sys.stdout.write(json.dumps(asdict(result)) + "\n")
    sys.stdout.flush()
    return 0


def _drop_privileges(uid: int) -> None:
    """Become ``uid``:``uid`` with no supplementary groups and no capabilities, or die."""
    if uid < 1:
        raise SystemExit(f"refusing to unpack as uid {uid}")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    # SECURITY: fail closed unless the kernel agrees nothing privileged is left.
    with open("/proc/self/status") as status:
        caps = {k: v.strip() for k, _, v in (line.partition(":") for line in status)
                if k.startswith("Cap")}
    if (os.getresuid() != (uid, uid, uid) or os.getresgid() != (uid, uid, uid)
            or os.getgroups() or any(int(caps.get(k, "1"), 16)
                                     for k in ("CapEff", "CapPrm", "CapAmb"))):
        raise SystemExit("could not drop privileges")


def _bound(job: _Job) -> None:
    def limit(which: int, value: int) -> None:
        resource.setrlimit(which, (value, value))

    resource.setrlimit(resource.RLIMIT_CPU, (job.cpu_seconds, job.cpu_seconds + 5))
    limit(resource.RLIMIT_AS, job.memory_bytes)
    limit(resource.RLIMIT_FSIZE, max(job.budget, 1))
    limit(resource.RLIMIT_NOFILE, 64)
    limit(resource.RLIMIT_CORE, 0)
    os.umask(0o022)


def _unpack(job: _Job) -> int:
    """Make every entry of the upload under ``job.dir_fd``; the number of entries."""
    used = count = 0
    with os.fdopen(job.archive_fd, "rb", buffering=_CHUNK) as raw:
        try:
            tar = tarfile.open(fileobj=raw, mode="r|*")
        except _PARSE_ERRORS as exc:
            raise _NotATar(_reason(exc)) from exc
        with tar:
            while True:
                try:
                    member = tar.next()
                except _PARSE_ERRORS as exc:
                    raise _NotATar(_reason(exc)) from exc
                if member is None:
                    break
                # A stream is read once: keep no list of every entry (typeshed omits it).
                tar.members.clear()  # type: ignore[attr-defined]
                count += 1
                if count > job.entries:
                    raise _Refused(f"the upload holds more than {job.entries} entries")
                used += _ENTRY_COST + (member.size if member.isreg() else 0)
                if used > job.budget:
                    raise _DiskFull(f"the files need more than the {job.budget} bytes free")
                try:
                    _make(job.dir_fd, tar, member)
                except OSError as exc:
                    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                        raise _DiskFull(str(exc)) from exc
                    raise
    os.fchmod(job.dir_fd, 0o755)  # what the build sandbox sees of the bind
    return count


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _show(name: str) -> str:
    return repr(name if len(name) <= 120 else name[:60] + "..." + name[-50:])


def _parts(member: tarfile.TarInfo) -> list[str]:
    """The entry's path as components; refuses what cannot be inside the tree."""
    name = member.name
    if "\0" in name:
        raise _Refused(f"{_show(name)} has a NUL byte in its name")
    if name.startswith("/"):
        raise _Refused(f"{_show(name)} is an absolute path")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise _Refused(f"{_show(name)} leads outside the build context ('..')")
    raw = os.fsencode(name)
    if len(raw) > NAME_MAX_BYTES or any(len(os.fsencode(p)) > _COMPONENT_MAX_BYTES
                                        for p in parts):
        raise _Refused(f"{_show(name)}: the name is too long")
    return parts


def _check_link(member: tarfile.TarInfo, parts: list[str]) -> None:
    target = member.linkname
    if not target or "\0" in target or len(os.fsencode(target)) > NAME_MAX_BYTES:
        raise _Refused(f"{_show(member.name)} is a link with an unusable target")
    if target.startswith("/"):
        raise _Refused(f"{_show(member.name)} is a link to an absolute path")
    where = posixpath.normpath(posixpath.join(*parts[:-1], target) if len(parts) > 1
                               else target)
    if where == ".." or where.startswith("../"):
        raise _Refused(f"{_show(member.name)} is a link to {_show(target)}, outside the "
                       "build context")


def _make(root_fd: int, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
    if member.islnk():
        raise _Refused(f"{_show(member.name)} is a hard link")
    if member.ischr() or member.isblk():
        raise _Refused(f"{_show(member.name)} is a device")
    if member.isfifo():
        raise _Refused(f"{_show(member.name)} is a FIFO")
    if not (member.isreg() or member.isdir() or member.issym()):
        raise _Refused(f"{_show(member.name)} is of a type uploads may not hold")
    parts = _parts(member)
    if not parts:
        if member.isdir():
            return  # the tree itself
        raise _Refused(f"{_show(member.name)} names the build context itself")
    if member.issym():
        _check_link(member, parts)
    parent = _parent(root_fd, parts[:-1], member.name)
    try:
        leaf = parts[-1]
        existing = _kind_of(parent, leaf)
        if existing == "dir":
            if member.isdir():
                return
            raise _Refused(f"{_show(member.name)} would replace a directory")
        if member.isdir():
            if existing is not None:
                raise _Refused(f"{_show(member.name)} is a directory where the upload has "
                               "a file or link")
            os.mkdir(leaf, 0o755, dir_fd=parent)
            return
        if existing is not None:
            os.unlink(leaf, dir_fd=parent)  # unlinkat: the name itself, never what it names
        if member.issym():
            os.symlink(member.linkname, leaf, dir_fd=parent)
        else:
            _write_file(parent, leaf, tar, member)
    finally:
        os.close(parent)


def _kind_of(parent: int, leaf: str) -> str | None:
    try:
        mode = os.stat(leaf, dir_fd=parent, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None
    return "dir" if stat.S_ISDIR(mode) else "other"


def _open_dir(dir_fd: int, path: str, name: str) -> int:
    """``path`` under ``dir_fd``, confined to the tree; refusals say why."""
    for _ in range(8):
        try:
            return openat2(dir_fd, path, _DIR_FLAGS)
        except OSError as exc:
            if exc.errno == errno.EAGAIN:
                continue  # a rename raced the lookup: the kernel asks to try again
            if exc.errno == errno.ELOOP:
                raise _Refused(f"{_show(name)} passes through a symbolic link") from exc
            if exc.errno == errno.ENOTDIR:
                raise _Refused(f"{_show(name)} is below a file, not a directory") from exc
            if exc.errno == errno.EXDEV:
                raise _Refused(f"{_show(name)} leads outside the build context") from exc
            if exc.errno == errno.ENAMETOOLONG:
                raise _Refused(f"{_show(name)}: the name is too long") from exc
            raise
    raise _Refused(f"{_show(name)}: its directory kept changing")


def _parent(root_fd: int, parts: list[str], name: str) -> int:
    """An fd of the directory the entry goes in, its missing directories made (0755)."""
    if not parts:
        return os.dup(root_fd)
    try:
        return _open_dir(root_fd, "/".join(parts), name)
    except FileNotFoundError:
        pass
    fd = os.dup(root_fd)
    try:
        for part in parts:
            try:
                step = _open_dir(fd, part, name)
            except FileNotFoundError:
                os.mkdir(part, 0o755, dir_fd=fd)  # mkdirat of one name: nothing followed
                step = _open_dir(fd, part, name)
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def _file_mode(member: tarfile.TarInfo) -> int:
    mode = member.mode & 0o755  # no setuid, setgid, sticky, group or other write
    if not mode & 0o100:
        mode &= ~0o111
    return mode | 0o600


def _write_file(parent: int, leaf: str, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
    if member.size < 0:
        raise _NotATar(f"{_show(member.name)} has a negative size")
    try:
        source = tar.extractfile(member)
    except _PARSE_ERRORS as exc:
        raise _NotATar(_reason(exc)) from exc
    if source is None:
        raise _NotATar(f"{_show(member.name)}: no data for a regular file")
    fd = openat2(parent, leaf, _FILE_FLAGS, 0o600)
    with os.fdopen(fd, "wb") as out:
        left = member.size
        while left > 0:
            try:
                chunk = source.read(min(left, _CHUNK))
            except _PARSE_ERRORS as exc:
                raise _NotATar(_reason(exc)) from exc
            if not chunk:
                raise _NotATar(f"{_show(member.name)}: the upload ends inside it")
            out.write(chunk)
            left -= len(chunk)
        out.flush()
        os.fchmod(fd, _file_mode(member))
        if 0 <= member.mtime < 2**33:
            os.utime(fd, (member.mtime, member.mtime))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
