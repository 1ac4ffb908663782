"""Slots: the host-side unit a sandbox runs in, from its start to its teardown.

A slot is a runtime container, its cgroup, overlay mount, network namespace and veth,
recorded on disk at every step (``_record``); a sandbox id is bound to it at hand-out.

* ``_table``: ``SlotTable``, the backend's live sandboxes: records, locks, claims,
  create and destroy. ``_context``: ``Context``, what every slot operation is given.
* ``_launch``: a cold start, the hand-out (``assign``), both for one sandbox (``boot``),
  envd started again in a stopped slot; ``_teardown``: the one idempotent teardown;
  ``_recovery``: re-attaching and sweeping after a restart.
* What the runtime is given: ``_ocispec`` (the OCI config), ``_seccomp``, ``_runtime``
  (the runtime's command line), ``_cgroups``, ``_files`` (the slot's directories, /etc
  files and overlay root), ``_disk`` (the overlay's upper layer on a file system of the
  sandbox's size: ENOSPC past it, usage from its counters; ``SeedImage``, a disk filled
  once for many slots to copy), ``_devfs`` (/dev across a
  dump and restore), ``_restorable`` (what runc slots need to be checkpointed).
* ``_stock``: ``SlotStock``, slots laid out ahead (files, disk, root, network
  namespace) for the restores of start snapshots.
* ``_process`` (host processes: identity, liveness, reaping), ``_usage``, ``_validate``,
  ``_layers_in_use``.
"""

from . import _devfs as devfs
from ._cgroups import CgroupTree
from ._context import Context
from ._disk import SeedImage, mount_image
from ._files import (
    disk_used,
    log_tail,
    prepare_data_dirs,
    replace_upper,
    write_identity,
    write_resolv_conf,
)
from ._launch import (
    assign,
    attach_egress,
    boot,
    cold_start,
    ensure_in_place,
    lay_out,
    lay_out_with_netns,
    limits_of,
    new_record,
    set_hostname_in,
    start_slot,
    trust_relay_ahead,
)
from ._layers_in_use import layers_in_use
from ._ocispec import ENVD_MOUNT, NOFILE_LIMIT, Limits, SandboxPlan, build_config
from ._process import become_subreaper, is_alive, owner_token, reap_if_child, start_time
from ._record import SlotPaths, SlotPhase, SlotRecord, save_record
from ._recovery import recover, restore_egress
from ._restorable import (
    LOCK_MARKER,
    ensure_flat_sysfs,
    netns_pin,
    pin_netns,
    restorable,
)
from ._runtime import OciRuntime, RuntimeFailed, empty_stdin, pidfd_exited, spawn, wait_exit
from ._seccomp import attach_compiled, remember_compiled
from ._stock import Layout, SlotStock
from ._table import SlotTable
from ._teardown import kill_processes, stop_processes, undo_after_failure
from ._validate import check_resources, pids_for, validate

__all__ = [
    "ENVD_MOUNT",
    "LOCK_MARKER",
    "NOFILE_LIMIT",
    "CgroupTree",
    "Context",
    "Layout",
    "Limits",
    "OciRuntime",
    "RuntimeFailed",
    "SandboxPlan",
    "SeedImage",
    "SlotPaths",
    "SlotPhase",
    "SlotRecord",
    "SlotStock",
    "SlotTable",
    "assign",
    "attach_compiled",
    "attach_egress",
    "become_subreaper",
    "boot",
    "build_config",
    "check_resources",
    "cold_start",
    "devfs",
    "disk_used",
    "empty_stdin",
    "ensure_flat_sysfs",
    "ensure_in_place",
    "is_alive",
    "kill_processes",
    "lay_out",
    "lay_out_with_netns",
    "layers_in_use",
    "limits_of",
    "log_tail",
    "mount_image",
    "netns_pin",
    "new_record",
    "owner_token",
    "pidfd_exited",
    "pids_for",
    "pin_netns",
    "prepare_data_dirs",
    "reap_if_child",
    "recover",
    "remember_compiled",
    "replace_upper",
    "restorable",
    "restore_egress",
    "save_record",
    "set_hostname_in",
    "spawn",
    "start_slot",
    "start_time",
    "stop_processes",
    "trust_relay_ahead",
    "undo_after_failure",
    "validate",
    "wait_exit",
    "write_identity",
    "write_resolv_conf",
]
