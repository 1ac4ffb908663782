"""Read the host's mount table (``/proc/self/mountinfo``) without shelling out."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class MountEntry:
    mount_point: str
    fs_type: str
    source: str
    super_options: str


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal.
    return (
        field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n")
        .replace("\\134", "\\")
    )


def _escape(path: str) -> str:
    return (path.replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011")
            .replace("\n", "\\012"))


def mount_table(mountinfo: Path = Path("/proc/self/mountinfo"),
                containing: str | None = None) -> list[MountEntry]:
    """The table; with ``containing``, only the lines that mention that path (skipped
    before parsing: a host running a thousand sandboxes has tens of thousands of mounts,
    and a sandbox's teardown asks for its own few)."""
    entries: list[MountEntry] = []
    needle = None if containing is None else _escape(containing)
    for line in mountinfo.read_text().splitlines():
        if needle is not None and needle not in line:
            continue
        left, _, right = line.partition(" - ")
        fields = left.split()
        tail = right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        entries.append(MountEntry(_unescape(fields[4]), tail[0], _unescape(tail[1]), tail[2]))
    return entries


def mounts_under(prefix: Path, table: list[MountEntry] | None = None) -> list[str]:
    """Mount points at or below ``prefix`` (deepest last, as the kernel lists them)."""
    root = str(prefix).rstrip("/")
    rows = mount_table(containing=root) if table is None else table
    return [m.mount_point for m in rows
            if m.mount_point == root or m.mount_point.startswith(root + "/")]


def is_mount_point(path: Path) -> bool:
    """Whether something is mounted at ``path``. A different device than its directory's
    says so at once (two stats; the mount table of a busy host is thousands of lines, ~1 ms
    to read and parse); a bind of the same file system needs the table."""
    target = str(path).rstrip("/")
    try:
        if os.lstat(target).st_dev != os.stat(os.path.dirname(target) or "/").st_dev:
            return True
    except OSError:
        pass
    return any(m.mount_point == target for m in mount_table())
