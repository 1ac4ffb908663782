"""The ``criu dump`` and ``criu restore`` command lines of a slot, from its OCI config.

CRIU is driven directly rather than through ``runc checkpoint|restore``: runc adds a Go
start-up, a second CRIU process to ask its version, and CRIU's own cgroup handling (a
private mount of every hierarchy) to every pause and resume, ~100 ms in all on the 2-vCPU
reference host. What runc would tell CRIU is said here instead, from the same config:

* **external mounts**: what comes from the host cannot be saved, so it is named at dump
  and bound again at restore. That is every bind mount of the config (envd's bundle, the
  /etc files, the flat /sys), the masked files (binds of the host's ``/dev/null``, all
  under the one key ``/dev/null``) and the device nodes runc binds from the host's /dev
  (no device node can be made in a user namespace). Keys are the paths inside; at restore
  each key maps to the host path in *this* slot's config, so a copy binds its own files.
* **envd's standard streams** are host files: external at dump, CRIU's own fds 0-2 at
  restore (``--inherit-fd``).
* **/dev** is external too when it holds only what runc put there (``slots._devfs``): no ``tar``.
* **cgroups** are left alone (``--manage-cgroups=ignore``): CRIU itself is started inside
  the slot's cgroups (``_cgroups``), so the tasks it forks are born there and their
  cgroup namespace is rooted there, as runc's are.
* **TCP**: ``--tcp-established`` saves connections in repair mode; at restore they come
  back all (``TCP_ALL``), only those between loopback addresses (``TCP_LOOPBACK``: a copy
  or a new namespace) or none (``TCP_NONE``). The choice is the caller's (``_dump``).
* **network lock**: ``--network-lock skip``. While a suspended sandbox is only images the
  host drops its packets (``network._tcp_hold``); CRIU's own lock (``nftables``: a table in the
  sandbox's namespace, made and removed through libnftables, ~20 ms per cycle) is used
  only when that hold cannot be taken, and for images an older Bac saved that way. A
  restore follows the method recorded in the images (skip: nothing to remove).
* ``--freeze-cgroup``: the caller froze the cgroup; CRIU takes the tasks from there.
* **inotify watches** are saved by path. The kernel hands CRIU an overlayfs file handle
  that cannot be opened again (the sandbox's root is mounted without ``nfs_export``), so
  CRIU finds the watched inode by scanning directories (its "irmap"): its own few hints
  (``/etc``, ...) and ``IRMAP_SCAN_PATHS``, where desktop programs watch (XFCE's panel,
  desktop and settings daemon, GLib's file monitors, dbus). Only a dump that meets a
  watch scans, and only until it has found it. A watch outside those trees (or on a
  deleted file) still fails the dump: ``Can't dump that handle`` in dump.log.

Seccomp filters, capabilities, ``no_new_privs``, credentials, namespaces (user, pid,
mount, ipc, uts, cgroup, time) and the user namespace's id maps are saved and restored by
CRIU itself, exactly as under runc; the network namespace is the one CRIU runs in
(``nsenter``), neither saved nor made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# The device nodes runc binds into every sandbox (its default device list).
RUNC_DEVICES = ("/dev/null", "/dev/random", "/dev/full", "/dev/tty", "/dev/zero",
                "/dev/urandom")
_MASK_KEY = "/dev/null"
TCP_ALL, TCP_LOOPBACK, TCP_NONE = "all", "loopback", "none"
# 2 = errors and warnings. Level 4 logs every page range (thousands of lines) and costs
# several ms per restore.
LOG_LEVEL = 2
# Paths inside the sandbox, searched by CRIU (nothing is created there).
IRMAP_SCAN_PATHS = ("/home", "/root", "/tmp", "/usr/share", "/usr/local/share", "/opt")  # noqa: S108


def _binds(config: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in config["mounts"] if m.get("type") == "bind"]


def _masked_files(config: dict[str, Any]) -> list[str]:
    # Directories are masked with a tmpfs (saved by CRIU), files with a bind of /dev/null.
    return [p for p in config["linux"].get("maskedPaths", []) if not p.endswith("/")
            and not Path(p).is_dir()]


def _common(images: Path, work: Path, log: str) -> list[str]:
    return ["-D", str(images), "-W", str(work), "-o", log, f"-v{LOG_LEVEL}",
            "--no-default-config", "--file-locks", "--manage-cgroups=ignore"]


def dump_argv(criu: str, config: dict[str, Any], *, pid: int, images: Path, work: Path,
              freezer: Path, stdio: dict[int, str], leave_running: bool,
              tcp_established: bool, network_lock: bool, dev_external: bool = False
              ) -> list[str]:
    argv = [criu, "dump", "-t", str(pid), *_common(images, work, "dump.log"),
            "--freeze-cgroup", str(freezer)]
    if dev_external:
        argv += ["--external", "mnt[/dev]:/dev"]
    for bind in _binds(config):
        argv += ["--external", f"mnt[{bind['destination']}]:{bind['destination']}"]
    for path in _masked_files(config):
        argv += ["--external", f"mnt[{path}]:{_MASK_KEY}"]
    for device in RUNC_DEVICES:
        argv += ["--external", f"mnt[{device}]:{device}"]
    for key in sorted(set(stdio.values())):
        argv += ["--external", key]
    if tcp_established:
        argv += ["--tcp-established", "--network-lock", "nftables" if network_lock else "skip"]
    else:
        argv += ["--tcp-close", "--network-lock", "skip"]
    for path in IRMAP_SCAN_PATHS:
        argv += ["--irmap-scan-path", path]
    if leave_running:
        argv.append("--leave-running")
    return argv


def restore_argv(criu: str, config: dict[str, Any], *, images: Path, work: Path,
                 pid_file: Path, inherit: list[str], tcp: str, lazy: bool = False,
                 devfs: Path | None = None) -> list[str]:
    # No --network-lock: the restore uses the dump's method, recorded in the images (CRIU
    # ignores the option there and warns, into the restored sandbox's log).
    # --mntns-compat-mode: CRIU's first mount engine. These mounts are all private (no
    # propagation groups, which mount-v2 exists to restore), and it restores them 2-3 ms
    # faster here (tests/integration/backend/test_restored_mounts.py holds them equal).
    argv = [criu, "restore", *_common(images, work, "restore.log"), "--restore-detached",
            "--pidfile", str(pid_file), "--root", str(config["root"]["path"]),
            "--evasive-devices", "--mntns-compat-mode"]
    if lazy:
        argv.append("--lazy-pages")  # served by lazy_pages_argv's daemon in the same work dir
    # The masks' key is the host's /dev/null, one of the devices.
    sources = {bind["destination"]: bind["source"] for bind in _binds(config)}
    sources |= {device: device for device in RUNC_DEVICES}
    if devfs is not None:
        sources["/dev"] = str(devfs)
    for key, source in sources.items():
        argv += ["--external", f"mnt[{key}]:{source}"]
    for value in inherit:
        argv += ["--inherit-fd", value]
    argv += {TCP_ALL: ["--tcp-established"],
             TCP_LOOPBACK: ["--tcp-established", "--tcp-close-external"],
             TCP_NONE: ["--tcp-close"]}[tcp]
    return argv


def lazy_pages_argv(criu: str, *, images: Path, work: Path) -> list[str]:
    """The daemon that serves a lazy restore's memory (see ``_lazy_pages``)."""
    return [criu, "lazy-pages", "-D", str(images), "-W", str(work), "-o", "lazy-pages.log",
            f"-v{LOG_LEVEL}", "--no-default-config"]
