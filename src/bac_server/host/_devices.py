"""The host's device nodes that sandboxes are given, and the check that they are root's.

The runtimes bind these host nodes into every sandbox's /dev (a user namespace cannot
``mknod``), and the sandbox's device cgroup allows exactly them (plus its own ptys). A
bind shares the inode: if one of them ever belongs to the sandbox uid range, root in any
sandbox can chmod or chown the host's node and break it for the whole machine. The
server refuses to start on such a host rather than hand the node out again.
"""

from __future__ import annotations

import contextlib
import grp
import os
import stat
from dataclasses import dataclass

from ._errors import HostSetupError


@dataclass(frozen=True)
class DeviceNode:
    path: str
    major: int
    minor: int
    mode: int  # the usual permissions, for the repair command
    terminal: bool = False  # may belong to group tty, as many distributions set it


SANDBOX_DEVICES = (
    DeviceNode("/dev/null", 1, 3, 0o666),
    DeviceNode("/dev/zero", 1, 5, 0o666),
    DeviceNode("/dev/full", 1, 7, 0o666),
    DeviceNode("/dev/random", 1, 8, 0o666),
    DeviceNode("/dev/urandom", 1, 9, 0o666),
    DeviceNode("/dev/tty", 5, 0, 0o666, terminal=True),
    DeviceNode("/dev/console", 5, 1, 0o600, terminal=True),
    DeviceNode("/dev/ptmx", 5, 2, 0o666, terminal=True),
)


class HostDeviceTaken(HostSetupError):
    """A host device node sandboxes are given is not root's (or not the device at all)."""


def _tty_gid() -> int | None:
    with contextlib.suppress(KeyError):
        return grp.getgrnam("tty").gr_gid
    return None


def _problem(node: DeviceNode, tty_gid: int | None) -> tuple[str, str] | None:
    """What is wrong with ``node`` and the command that repairs it; None: nothing."""
    make = (f"rm -f {node.path} && mknod -m {node.mode:o} {node.path} c {node.major} "
            f"{node.minor}")
    try:
        info = os.lstat(node.path)
    except FileNotFoundError:
        # Only the console may be absent (containers, some VMs); the rest every host has.
        return None if node.path == "/dev/console" else ("is missing", make)
    if not stat.S_ISCHR(info.st_mode) or (os.major(info.st_rdev), os.minor(info.st_rdev)) != (
            node.major, node.minor):
        return f"is not the character device {node.major}:{node.minor}", make
    groups = {0} | ({tty_gid} if node.terminal and tty_gid is not None else set())
    if info.st_uid != 0 or info.st_gid not in groups:
        return (f"is owned by {info.st_uid}:{info.st_gid}, not root",
                f"chown root:root {node.path} && chmod {node.mode:o} {node.path}")
    return None


def check_device_nodes(nodes: tuple[DeviceNode, ...] = SANDBOX_DEVICES) -> None:
    """Raise :class:`HostDeviceTaken`, one line naming the node and its repair, at the
    first node that is not the right device owned by root."""
    tty_gid = _tty_gid()
    for node in nodes:
        found = _problem(node, tty_gid)
        if found is not None:
            problem, repair = found
            raise HostDeviceTaken(
                f"host device {node.path} {problem} (sandboxes are given it, so their root "
                f"could change it for the whole host); repair with `{repair}` as root, "
                "and find what changed it")
