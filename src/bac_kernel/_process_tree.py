"""Killing a kernel with everything it started, wherever those processes went.

A kernel leads its own process group, but not all of its children stay in it: bash_kernel
runs bash on a pty through pexpect, which puts bash in a new session. So the tree is read
from `/proc/<pid>/task/<tid>/children` before anything is killed, and each member's
process group is killed too (catching a pipeline's siblings).
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """All living descendants of `pid`, parents before children."""
    found: list[int] = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        for task in Path(f"/proc/{parent}/task").glob("*/children"):
            with contextlib.suppress(OSError, ValueError):
                children = [int(c) for c in task.read_text().split()]
                found += children
                pending += children
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL `pid`, its process group, and every descendant with its process group."""
    # Collect first: once the kernel dies its children are reparented and lost to us.
    members = [pid, *descendants(pid)]
    groups = set()
    for member in members:
        with contextlib.suppress(OSError):
            groups.add(os.getpgid(member))
    for group in groups:
        if group > 1 and group != os.getpgrp():
            with contextlib.suppress(OSError):
                os.killpg(group, signal.SIGKILL)
    for member in members:
        with contextlib.suppress(OSError):
            os.kill(member, signal.SIGKILL)
