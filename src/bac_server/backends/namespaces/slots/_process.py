"""Processes on the host: identity that survives pid reuse, liveness, and reaping.

A pid alone is not an identity: after a sandbox dies its pid can be reused. Records keep
the pid *and* its start time (field 22 of ``/proc/<pid>/stat``); a process is "the same"
only if both match and it is not a zombie.

The server makes itself a child subreaper, so sandbox init processes (double-forked by
the runtime) are re-parented to it and can be reaped by pidfd; on a host whose pid 1 does
not reap, dead sandboxes would otherwise stay as zombies. When the server exits they are
re-parented to the next reaper up and keep running.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal

_PR_SET_CHILD_SUBREAPER = 36
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def become_subreaper() -> None:
    _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            raw = stat.read().decode()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # comm may contain spaces and parentheses: split after the last ')'.
    return raw[raw.rindex(")") + 2:].split()


def start_time(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def is_alive(pid: int | None, started: int | None) -> bool:
    if pid is None:
        return False
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return started is None or int(fields[19]) == started


def owner_token() -> str:
    """Identifies this server process across pid reuse."""
    return f"{os.getpid()}:{start_time(os.getpid())}"


def owner_alive(token: str) -> bool:
    pid_text, _, started = token.partition(":")
    try:
        return is_alive(int(pid_text), int(started))
    except ValueError:
        return False


def reap_if_child(pid: int) -> None:
    """Collect the exit status of ``pid`` if it is our (dead) child; never blocks."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def kill_pidfd(pidfd: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
