"""``prepare_host()``: every host change Bac needs, idempotent, called at each server start."""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from ._cgroup_migrations import favor_dynamic_migrations
from ._cgroups import CgroupLayout, controller_dirs, ensure_crun_compatible_cgroups
from ._checks import check_binaries, check_cgroup_controllers, check_kernel, check_root
from ._devices import check_device_nodes
from ._errors import HostChangeFailed
from ._forwarding import ensure_firewall
from ._lxcfs import ensure_lxcfs
from ._sysctl import raise_sysctls, read_sysctl

_log = logging.getLogger(__name__)

PARENT_CGROUP = "bac"


@dataclass(frozen=True)
class HostSettings:
    runtime: str = "crun"
    veth_prefix: str = "bacs"
    parent_cgroup: str = PARENT_CGROUP
    # Share of the host's task table all sandboxes together may use, so the host can
    # always fork (the task table: the lower of kernel.threads-max and kernel.pid_max).
    sandbox_pid_share: float = 0.75
    # cgroup migrations (every resume, every runc start) without an RCU grace period.
    favor_dynamic_cgroups: bool = True
    # Start LXCFS when it is not mounted (sandboxes' /proc shows their own limits).
    lxcfs: bool = True


@dataclass(frozen=True)
class HostReport:
    cgroup_layout: CgroupLayout
    sysctls_changed: dict[str, int] = field(default_factory=dict)


def sandboxes_pids_max(settings: HostSettings) -> int:
    """The pids all sandboxes together may hold: a share of the tasks the kernel allows.
    threads-max (sized by the kernel from the RAM) is the bound that matters: with
    pid_max raised to 4M it is far lower (192,730 on the 2-vCPU reference machine, where
    75 % of pid_max, the ceiling before, was 3,145,728)."""
    tasks = min(read_sysctl("kernel.threads-max"), read_sysctl("kernel.pid_max"))
    return int(tasks * settings.sandbox_pid_share)


def _ensure_parent_cgroup(layout: CgroupLayout, settings: HostSettings) -> None:
    """Cap the pids of all sandboxes together below the host's task table."""
    limit = sandboxes_pids_max(settings)
    dirs = controller_dirs(layout, settings.parent_cgroup)
    pids_dir = dirs.get("pids", dirs.get("unified"))
    if pids_dir is None:
        return
    try:
        pids_dir.mkdir(exist_ok=True)
        if layout is CgroupLayout.V2:
            # Delegate the controllers sandboxes use down to Bac's subtree, one at a time
            # so one already enabled (or managed by systemd) does not stop the others.
            for parent in (pids_dir.parent, pids_dir):
                for controller in ("cpu", "memory", "pids"):
                    with contextlib.suppress(OSError):
                        (parent / "cgroup.subtree_control").write_text(f"+{controller}")
        # SECURITY: an aggregate ceiling so sandboxes together cannot exhaust host pids.
        pids_dir.joinpath("pids.max").write_text(f"{limit}\n")
    except OSError as exc:
        raise HostChangeFailed(f"could not prepare the parent cgroup {pids_dir}: {exc}") from exc


def prepare_host(settings: HostSettings | None = None) -> HostReport:
    """Check and prepare this host for namespace sandboxes. Safe to call repeatedly.

    Raises :class:`~bac_server.host.HostSetupError` (with advice) when it cannot."""
    cfg = settings or HostSettings()
    check_root()
    check_binaries(cfg.runtime)
    check_kernel()
    check_device_nodes()
    layout = ensure_crun_compatible_cgroups()
    check_cgroup_controllers(unified=layout is CgroupLayout.V2)
    if cfg.favor_dynamic_cgroups:
        favor_dynamic_migrations()
    changed = raise_sysctls()
    ensure_firewall(cfg.veth_prefix)
    _ensure_parent_cgroup(layout, cfg)
    if cfg.lxcfs:
        ensure_lxcfs()  # cosmetic: fails open with a warning
    Path("/run/bac").mkdir(mode=0o700, exist_ok=True)
    os.chmod("/run/bac", 0o700)
    _log.info("host ready: cgroups %s, nftables table inet bac, forwarding on", layout.value)
    return HostReport(cgroup_layout=layout, sysctls_changed=changed)
