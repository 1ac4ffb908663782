"""Running CRIU for one slot: inside its network namespace, and for a restore inside its
cgroups; reading its errors; whether a suspend must hold connections; CRIU's own lock.

CRIU runs in the sandbox's network namespace (``nsenter``), which the host owns: it then
treats the namespace as its own and neither saves nor re-creates it, and the restored
tasks inherit it before their user namespace is made, as under runc. A restore starts as a
shell that moves itself into the slot's cgroups and becomes ``nsenter``, then CRIU
(``_cgroups.PLACE_AND_EXEC``): the tasks CRIU forks are born in the right cgroups.

A suspend that keeps TCP connections holds them on the host side (``network._tcp_hold``). Only
when that fails, and in images an older Bac saved, are they locked by CRIU itself (an
nftables table ``CRIU-<id>`` in the sandbox's namespace drops their packets, so peers see
a stalled connection rather than a reset). CRIU's restore removes that table; when the
images are discarded instead (a restart from the files only, a roll-back to a checkpoint)
``release_network_lock`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from bac_server.cancel_safe import to_the_end

from ...slots import wait_exit
from ._cgroups import PLACE_AND_EXEC

# TCP states whose sockets CRIU saves as connections (not LISTEN 0A, CLOSE 07,
# TIME_WAIT 06 or SYN_RECV 03, which no task owns).
_CONNECTED = {"01", "02", "04", "05", "08", "09", "0B"}
_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}


def _nsenter(netns: Path, argv: list[str]) -> list[str]:
    # SECURITY: only this child (and the CRIU it becomes) enters the sandbox's network
    # namespace, which the host owns; the server never changes namespace.
    return ["nsenter", f"--net={netns}", "--", *argv]


async def run_dump(argv: list[str], netns: Path) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *_nsenter(netns, argv), env=_ENV, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    return proc.returncode or 0, err.decode(errors="replace")


async def run_restore(argv: list[str], netns: Path, cgroup_procs: list[str], log_fd: int,
                      *, userfaultfd: bool = False) -> int:
    """CRIU's fds 0-2 are /dev/null and ``log_fd``: the restored tasks inherit them.
    ``userfaultfd``: a lazy restore; CRIU gets /dev/userfaultfd opened here, before it
    joins the slot's device cgroup, which denies it (CRIU closes it in every task).
    Waited for to the end, even if the caller is cancelled (a restore is never left
    running unwatched)."""
    env = {**_ENV, "BAC_CGROUP_PROCS": " ".join(cgroup_procs)}
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    uffd = os.open("/dev/userfaultfd", os.O_RDWR | os.O_CLOEXEC) if userfaultfd else -1
    actions = [(os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, log_fd, 1),
               (os.POSIX_SPAWN_DUP2, log_fd, 2)]
    if uffd >= 0:
        env["CRIU_USERFAULTFD_FD"] = str(uffd)
        actions.append((os.POSIX_SPAWN_DUP2, uffd, uffd))  # clears close-on-exec, child only
    try:
        # SECURITY: the shell writes its own pid into the slot's cgroups and becomes CRIU;
        # a failed write ends it before any task exists (exit 97).
        # posix_spawn and a pidfd, not an asyncio subprocess: no fork of the server and no
        # child-watcher thread between CRIU's exit and this wait (~1.5 ms of a resume).
        launcher = ["/bin/sh", "-c", PLACE_AND_EXEC, "sh", *_nsenter(netns, argv)]
        pid = os.posix_spawn(launcher[0], launcher, env, file_actions=actions)  # noqa: ASYNC221
    finally:
        os.close(null)
        if uffd >= 0:
            os.close(uffd)
    return await to_the_end(wait_exit(pid))


def criu_errors(log: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [line for line in log.read_text(errors="replace").splitlines()
                 if "Error" in line and "RLIMIT_NOFILE" not in line]
        return "\n".join(lines[-8:])
    return ""


def _tcp_in_use(pid: int, name: str) -> int:
    """Sockets in the namespace's TCP tables per ``sockstat``: listeners and connections."""
    with contextlib.suppress(FileNotFoundError):
        for line in Path(f"/proc/{pid}/net/{name}").read_text().splitlines():
            fields = line.split()
            if fields and fields[0] in ("TCP:", "TCP6:") and "inuse" in fields:
                return int(fields[fields.index("inuse") + 1])
    return 1  # unknown: look at the table


def has_connections(pid: int) -> bool:
    """Whether the network namespace of ``pid`` holds TCP connections (any owner)."""
    # Listing a TCP table walks the host's whole established hash (~5 ms here); the
    # per-namespace counters say when there is nothing to list.
    for name, counter in (("tcp", "sockstat"), ("tcp6", "sockstat6")):
        if _tcp_in_use(pid, counter) == 0:
            continue
        with contextlib.suppress(FileNotFoundError):
            for line in Path(f"/proc/{pid}/net/{name}").read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 3 and fields[3] in _CONNECTED:
                    return True
    return False


async def _nft(netns: Path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        *_nsenter(netns, ["nft", *args]), env=_ENV, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    out, _ = await proc.communicate()
    return out.decode(errors="replace")


async def release_network_lock(netns: Path) -> None:
    """Drop CRIU's lock tables from the sandbox's namespace (nothing else is there: the
    sandbox's own firewall lives on the host side of its veth)."""
    for line in (await _nft(netns, "list", "tables")).splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "table" and parts[2].startswith("CRIU-"):
            # SECURITY: deletes only CRIU's own table in the sandbox's namespace.
            await _nft(netns, "delete", "table", parts[1], parts[2])
