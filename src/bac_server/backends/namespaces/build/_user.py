"""Who a build step runs as: ``BuildStep.user`` looked up in the step's own /etc files.

``user`` is a name, a uid, or either followed by ``:group`` (a name or a gid), as in a
Dockerfile's USER. A name must exist in the rootfs' /etc/passwd; a bare uid need not (it
then runs with gid 0 and HOME=/). The primary group comes from passwd unless one is
given; supplementary groups are the /etc/group entries listing the user by name.

The files are read on the host from the step's merged rootfs, which its earlier steps
wrote: every path is opened without following links and only regular files are read,
so a crafted layer cannot make the host read anything outside it.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

_MAX_FILE = 4 << 20  # larger /etc/passwd or /etc/group files are refused


class UserLookupError(Exception):
    """``BuildStep.user`` names nobody in the step's rootfs (the message says why)."""


@dataclass(frozen=True)
class StepUser:
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str


def _read_etc(rootfs: Path, name: str) -> str | None:
    """The text of ``/etc/<name>`` inside ``rootfs``; None when it does not exist."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    root = os.open(rootfs, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        etc = os.open("etc", flags | os.O_DIRECTORY, dir_fd=root)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UserLookupError(f"/etc of the step's rootfs is not a directory ({exc})") from exc
    finally:
        os.close(root)
    try:
        # O_NONBLOCK: a FIFO planted at /etc/passwd must not block the server.
        fd = os.open(name, flags | os.O_NONBLOCK, dir_fd=etc)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EACCES):
            raise UserLookupError(f"/etc/{name} is not a regular file") from exc
        raise
    finally:
        os.close(etc)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_FILE:
            raise UserLookupError(f"/etc/{name} is not a regular file of at most "
                                  f"{_MAX_FILE >> 20} MiB")
        return os.read(fd, _MAX_FILE).decode(errors="replace")
    finally:
        os.close(fd)


def _entries(text: str | None, width: int) -> list[list[str]]:
    rows = []
    for line in (text or "").splitlines():
        fields = line.split(":")
        if len(fields) >= width and not line.startswith("#"):
            rows.append(fields)
    return rows


def _number(text: str, what: str) -> int | None:
    if not text.isdigit():
        return None
    value = int(text)
    if value > 2**32 - 2:
        raise UserLookupError(f"{what} {text} is out of range")
    return value


def resolve_user(rootfs: Path, spec: str, id_count: int) -> StepUser:
    """Resolve ``spec`` against the rootfs; ids must be below ``id_count`` (the mapping)."""
    user, has_group, group = spec.partition(":")
    if not user or (has_group and not group):
        raise UserLookupError(f"invalid user {spec!r} (expected name, uid, or either "
                              "followed by ':group')")
    passwd = _entries(_read_etc(rootfs, "passwd"), 7)
    uid = _number(user, "uid")
    match = [e for e in passwd if (e[2] == user if uid is not None else e[0] == user)]
    if uid is None and not match:
        raise UserLookupError(f"unable to find user {user!r}: no matching entry in "
                              "/etc/passwd")
    entry = match[0] if match else None
    if entry is not None:
        uid = _number(entry[2], "uid")
        if uid is None:
            raise UserLookupError(f"/etc/passwd gives user {user!r} a bad uid {entry[2]!r}")
    gid = (_number(entry[3], "gid") if entry is not None else 0)
    if gid is None:
        raise UserLookupError(f"/etc/passwd gives user {user!r} a bad gid")
    groups: tuple[int, ...] = ()
    group_rows = _entries(_read_etc(rootfs, "group"), 4) if (has_group or entry) else []
    if has_group:
        gid = _number(group, "gid")
        if gid is None:
            found = [g for g in group_rows if g[0] == group and g[2].isdigit()]
            if not found:
                raise UserLookupError(f"unable to find group {group!r}: no matching entry "
                                      "in /etc/group")
            gid = int(found[0][2])
    elif entry is not None:
        groups = tuple(sorted({int(g[2]) for g in group_rows
                               if g[2].isdigit() and entry[0] in g[3].split(",")} - {gid}))
    assert uid is not None
    for value in (uid, gid, *groups):
        if value >= id_count:
            raise UserLookupError(f"id {value} of user {spec!r} is outside the sandbox's "
                                  f"id range (0..{id_count - 1})")
    home = entry[5] if entry is not None and entry[5].startswith("/") else "/"
    return StepUser(uid=uid, gid=gid, groups=groups, home=home)
