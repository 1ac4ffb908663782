"""A sandbox's confinement as the kernel reports it, saved at dump and checked at restore.

CRIU restores seccomp filters, capabilities, ``no_new_privs`` and the user namespace's id
maps from its images; nothing outside the images says they came back. So the init's view
is recorded when the sandbox is saved and compared when it is restored, and a restore
that differs in any of them fails closed. Its network namespace is checked too: it must be
the slot's pinned one (CRIU joins whatever namespace it runs in).
"""

from __future__ import annotations

import os
from pathlib import Path

from bac_server.backends.base import CheckpointFailed

_STATUS_FIELDS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp",
                  "Seccomp_filters")
# Every field ``observe`` records: a saved record must hold them all.
FIELDS = (*_STATUS_FIELDS, "uid_map", "gid_map")


def observe(pid: int) -> dict[str, str]:
    """The fields of ``/proc/<pid>/status`` and the id maps that make up confinement."""
    found: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in _STATUS_FIELDS:
            found[key] = value.strip()
    for name in ("uid_map", "gid_map"):
        found[name] = " ".join(Path(f"/proc/{pid}/{name}").read_text().split())
    missing = [name for name in _STATUS_FIELDS if name not in found]
    if missing:
        raise CheckpointFailed(f"process {pid} reports no {missing}")
    return found


def check(pid: int, saved: dict[str, str], netns: Path) -> None:
    """Raise CheckpointFailed unless the restored init is confined as ``saved`` says and
    lives in the network namespace pinned at ``netns``."""
    # SECURITY: a record without a field (an older or damaged dump) would leave that part
    # of the confinement unchecked: refused, like one that differs.
    missing = [key for key in FIELDS if key not in saved]
    if missing:
        raise CheckpointFailed(f"the saved confinement of {pid} lacks {missing}: the restore "
                               "cannot be checked")
    try:
        now = observe(pid)
        in_netns = os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(netns).st_ino
        own_userns = os.stat(f"/proc/{pid}/ns/user").st_ino != os.stat("/proc/self/ns/user").st_ino
    except OSError as exc:
        raise CheckpointFailed(f"restored init {pid} is gone: {exc}") from exc
    differs = {key: (value, now.get(key)) for key, value in saved.items() if now.get(key) != value}
    if differs:
        raise CheckpointFailed(f"restored init {pid} is confined differently: {differs}")
    if not in_netns:
        raise CheckpointFailed(f"restored init {pid} is not in its network namespace")
    if not own_userns:
        raise CheckpointFailed(f"restored init {pid} runs in the host's user namespace")
