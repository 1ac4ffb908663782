"""Signal a whole process tree.

A tree is the started process plus everything that descends from it (by parent pid) or
shares its session or process group (every command gets ``setsid``, so session id = its
pid; that catches descendants whose parent already exited). For SIGKILL the members are
first frozen with SIGSTOP, re-scanning until no new member appears, so a forking loop
cannot outrun the kill.

What escapes: a descendant that both left the session (``setsid``) and lost its parent
link (double-fork daemons) — exactly what a daemon means to do. Inside a sandbox the
sandbox's own teardown ends those.
"""

from __future__ import annotations

import os
import signal


def _snapshot() -> dict[int, tuple[int, int, int]]:
    """pid → (ppid, pgrp, session) for every visible process."""
    table: dict[int, tuple[int, int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        # The command name may contain spaces and parentheses: split after the last ')'.
        fields = raw[raw.rfind(b")") + 2 :].split()
        if len(fields) >= 4:
            table[int(name)] = (int(fields[1]), int(fields[2]), int(fields[3]))
    return table


def tree_members(root: int) -> set[int]:
    table = _snapshot()
    members = {pid for pid, (_, pgrp, sid) in table.items() if sid == root or pgrp == root}
    if root in table:
        members.add(root)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    stack = list(members)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in members:
                members.add(child)
                stack.append(child)
    members.discard(os.getpid())
    return members


def _send(pid: int, signum: int) -> None:
    try:
        # SECURITY: only pids found in the started process's tree are signalled; envd
        # itself is excluded in tree_members.
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def kill_tree(root: int, signum: int = signal.SIGKILL) -> None:
    if signum != signal.SIGKILL:
        try:
            os.killpg(root, signum)
        except ProcessLookupError:
            _send(root, signum)
        return
    frozen: set[int] = set()
    for _ in range(64):
        fresh = tree_members(root) - frozen
        if not fresh:
            break
        for pid in fresh:
            _send(pid, signal.SIGSTOP)
        frozen |= fresh
    for pid in frozen:
        _send(pid, signal.SIGKILL)
    try:
        os.killpg(root, signal.SIGKILL)
    except ProcessLookupError:
        pass
