"""Is a path on a network filesystem? (E2B refuses to watch those unless asked to.)"""

from __future__ import annotations

import os

_NETWORK_TYPES = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "ceph", "glusterfs")


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \\ooo octal.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) + 1 and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def is_network_mount(path: str) -> bool:
    target = os.path.realpath(path)
    best, best_type = "", ""
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return False
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5:
            continue
        mount_point = _unescape(fields[4])
        prefix = mount_point.rstrip("/") + "/"
        if (target == mount_point or target.startswith(prefix)) and len(mount_point) >= len(best):
            best, best_type = mount_point, right.split()[0] if right.split() else ""
    if "overlay" in best_type:  # fuse-overlayfs is a local rootfs, not a network mount
        return False
    return best_type in _NETWORK_TYPES or best_type.startswith("fuse")
