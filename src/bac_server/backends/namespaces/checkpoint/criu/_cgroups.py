"""A slot's cgroups around a direct CRIU restore: made before, placed into, checked after.

CRIU is told to leave cgroups alone (``_args``); the restore instead runs inside the
slot's cgroups, so every task it forks is born in them and the sandbox's cgroup namespace
is rooted there, as under runc. What runc set up at the first start is set up again from
what was saved with the images:

* the cgroup ``/bac/<slot>`` in every hierarchy the host has (runc joins them all);
* cpuset: the parent's CPUs and memory nodes (a new v1 cpuset is empty; runc copies them);
* devices: exactly the list the sandbox had when it was saved (runc's defaults and the
  config's), first denying everything;
* CPU, memory and pids limits: the slot's own (``CgroupTree.apply``).

Only cgroup v1 device control is reproduced here; on a unified (v2) host runc enforces
devices with a BPF program of its own, so checkpoints keep going through runc there
(``direct_supported``). After a restore, ``check_placement`` fails closed when the
restored init is anywhere else.
"""

from __future__ import annotations

from pathlib import Path

from bac_server.backends.base import CheckpointFailed
from bac_server.host import CgroupLayout

from ...slots import CgroupTree, Limits

# The shell that puts itself (and so the CRIU it becomes) into the slot's cgroups before
# CRIU forks a single task: ``$BAC_CGROUP_PROCS`` lists the cgroup.procs files.
PLACE_AND_EXEC = ('for f in $BAC_CGROUP_PROCS; do echo $$ > "$f" || exit 97; done; '
                  'exec "$@"')
PLACEMENT_FAILED = 97


def direct_supported(cgroups: CgroupTree) -> bool:
    return cgroups.layout is not CgroupLayout.V2 and "devices" in cgroups.dirs("x")


def devices_of(cgroups: CgroupTree, relative: str) -> list[str]:
    """The device rules of a live slot, as ``devices.list`` shows them."""
    text = (cgroups.dirs(relative)["devices"] / "devices.list").read_text()
    return [line.strip() for line in text.splitlines() if line.strip()]


def _copy_from_parent(directory: Path, name: str) -> None:
    own = directory / name
    if not own.read_text().strip():
        own.write_text((directory.parent / name).read_text().strip())


def prepare(cgroups: CgroupTree, relative: str, devices: list[str], limits: Limits) -> list[str]:
    """Make the slot's cgroups as runc had them; returns the cgroup.procs files to join.
    Blocking. Raises CheckpointFailed (nothing is left half-configured that a later
    ``CgroupTree.remove`` would not take away)."""
    dirs = cgroups.dirs(relative)
    try:
        for directory in dirs.values():
            # SECURITY: only the slot's own cgroup below Bac's parent is made and written.
            directory.mkdir(exist_ok=True)
        if "cpuset" in dirs:
            for name in ("cpuset.cpus", "cpuset.mems"):
                _copy_from_parent(dirs["cpuset"], name)
        rules = dirs["devices"]
        # SECURITY: deny every device first, then allow exactly the saved rules.
        (rules / "devices.deny").write_text("a")
        for rule in devices:
            (rules / "devices.allow").write_text(rule)
        if sorted(devices_of(cgroups, relative)) != sorted(devices):
            raise CheckpointFailed(f"cgroup {relative}: device rules did not take")
        cgroups.apply(relative, limits)
    except OSError as exc:
        raise CheckpointFailed(f"cgroup {relative} for a restore: {exc}") from exc
    return [str(directory / "cgroup.procs") for directory in dirs.values()]


def check_placement(cgroups: CgroupTree, relative: str, pid: int) -> None:
    """Fail closed unless ``pid`` sits in the slot's cgroup in every hierarchy Bac uses."""
    want = "/" + relative.strip("/")
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError as exc:
        raise CheckpointFailed(f"restored init {pid} is gone: {exc}") from exc
    missing = set(cgroups.dirs(relative))
    for line in lines:
        _, controllers, path = line.split(":", 2)
        names = set(controllers.split(",")) if controllers else {"unified"}
        if names & missing:
            if path != want:
                raise CheckpointFailed(f"restored init {pid} is in {line!r}, not {want}")
            missing -= names
    if missing:
        raise CheckpointFailed(f"restored init {pid}: no {sorted(missing)} cgroup")
