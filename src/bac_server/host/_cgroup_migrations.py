"""Cheap cgroup migrations: the ``favordynmods`` option of the cgroup2 mount.

Every resume of a paused sandbox (and every start under runc) moves a fresh process into
the sandbox's cgroups. By default the kernel guards migrations with a per-CPU rwsem whose
writer waits for an RCU grace period each time the lock has been idle: 5-20 ms on the
2-vCPU reference VM, paid by the first ``cgroup.procs`` write of a quiet host's resume.
``favordynmods`` (Linux >= 6.0; the kernel's cgroup-v2 documentation) keeps that rwsem in
its slow mode instead: migrations no longer wait for a grace period, forks and exits take
a shared lock the ordinary way. The rwsem is one for the whole kernel, so the option on
the cgroup2 mount serves the v1 hierarchies of a hybrid host too.

It is a mount option, changed in place (``MS_REMOUNT``) and undone the same way
(``docs/security.md``). Best effort: an older kernel refuses it and nothing else changes.
"""

from __future__ import annotations

import logging

from ._cgroups import unified_mount
from ._mounts import mount_table
from ._syscalls import mount

_log = logging.getLogger(__name__)
OPTION = "favordynmods"
_MS_REMOUNT = 0x20


def favor_dynamic_migrations() -> bool:
    """Set ``favordynmods`` on the host's cgroup2 mount; True when it was changed now.
    Never raises: without it only resumes and starts are slower."""
    target = unified_mount()
    if target is None:
        return False
    options = _options(str(target))
    if options is None or OPTION in options:
        return False
    # The flags of a cgroup2 remount are the whole new set: keep the ones it has.
    kept = [o for o in options if o in ("nsdelegate", "memory_localevents",
                                        "memory_recursiveprot", "memory_hugetlb_accounting")]
    try:
        # SECURITY: changes how the kernel locks cgroup migrations, not who may migrate
        # or any limit; the mount's other cgroup2 flags are passed back unchanged.
        mount("none", str(target), None, _MS_REMOUNT, ",".join([*kept, OPTION]))
    except OSError as exc:
        _log.info("cgroup2 mount %s: %s not set (%s); resumes pay an RCU grace period",
                  target, OPTION, exc)
        return False
    _log.info("cgroup2 mount %s: %s set (cgroup migrations without an RCU grace period)",
              target, OPTION)
    return True


def dynamic_migrations_favored() -> bool:
    target = unified_mount()
    options = _options(str(target)) if target is not None else None
    return options is not None and OPTION in options


def _options(mount_point: str) -> list[str] | None:
    for entry in mount_table():
        if entry.mount_point == mount_point and entry.fs_type == "cgroup2":
            return entry.super_options.split(",")
    return None
