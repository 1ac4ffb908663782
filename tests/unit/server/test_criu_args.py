"""The CRIU command lines of a slot, built from its OCI config (no CRIU run here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bac_server.backends.namespaces.checkpoint.criu._args import (
    RUNC_DEVICES,
    TCP_ALL,
    TCP_LOOPBACK,
    TCP_NONE,
    dump_argv,
    lazy_pages_argv,
    restore_argv,
)


def _config(slot: Path) -> dict[str, Any]:
    return {
        "root": {"path": str(slot / "rootfs")},
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs"},
            {"destination": "/sys", "type": "bind", "source": "/run/bac-sys"},
            {"destination": "/opt/bac", "type": "bind", "source": "/data/envd/abc"},
            {"destination": "/etc/hosts", "type": "bind", "source": str(slot / "etc/hosts")},
        ],
        # /proc/acpi is a directory on every Linux host: masked with a tmpfs, not a bind.
        "linux": {"maskedPaths": ["/proc/kcore", "/proc/acpi"]},
    }


def _externals(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == "--external"]


def test_dump_names_every_host_mount_and_stdio_file() -> None:
    """Binds, masked files (under the /dev/null key) and runc's devices are external at
    dump, keyed by their path inside; envd's stdio files too; directory masks are not."""
    argv = dump_argv("criu", _config(Path("/s/a")), pid=42, images=Path("/i"), work=Path("/w"),
                     freezer=Path("/sys/fs/cgroup/freezer/bac/a"), stdio={1: "file[1b:2]"},
                     leave_running=False, tcp_established=True, network_lock=True)
    externals = _externals(argv)
    assert {"mnt[/sys]:/sys", "mnt[/opt/bac]:/opt/bac", "mnt[/etc/hosts]:/etc/hosts",
            "mnt[/proc/kcore]:/dev/null", "file[1b:2]"} <= set(externals)
    assert {f"mnt[{d}]:{d}" for d in RUNC_DEVICES} <= set(externals)
    assert not any("/proc/acpi" in e for e in externals)
    assert argv[:4] == ["criu", "dump", "-t", "42"]
    assert "--manage-cgroups=ignore" in argv and "--leave-running" not in argv
    assert argv[argv.index("--freeze-cgroup") + 1] == "/sys/fs/cgroup/freezer/bac/a"
    assert argv[argv.index("--network-lock") + 1] == "nftables"
    assert "--tcp-established" in argv and "--tcp-close" not in argv


def test_checkpoint_dump_closes_connections_without_lock() -> None:
    """A dump that leaves the sandbox running, or keeps no connections, takes no lock."""
    argv = dump_argv("criu", _config(Path("/s/a")), pid=1, images=Path("/i"), work=Path("/w"),
                     freezer=Path("/f"), stdio={}, leave_running=True, tcp_established=False,
                     network_lock=False)
    assert "--leave-running" in argv and "--tcp-close" in argv
    assert argv[argv.index("--network-lock") + 1] == "skip"


def test_restore_binds_this_slots_files() -> None:
    """At restore each key maps to the host path in the restoring slot's own config, the
    root is that slot's rootfs, stdio comes from CRIU's fds, and lazy restores say so."""
    slot = Path("/data/sandboxes/copy")
    argv = restore_argv("criu", _config(slot), images=Path("/i"), work=Path("/w"),
                        pid_file=Path("/w/init.pid"), inherit=["fd[1]:file[1b:2]"],
                        tcp=TCP_NONE, lazy=True)
    externals = _externals(argv)
    assert f"mnt[/etc/hosts]:{slot}/etc/hosts" in externals
    assert "mnt[/sys]:/run/bac-sys" in externals and "mnt[/dev/null]:/dev/null" in externals
    assert len(externals) == len(set(externals))
    assert argv[argv.index("--root") + 1] == f"{slot}/rootfs"
    assert argv[argv.index("--inherit-fd") + 1] == "fd[1]:file[1b:2]"
    assert "--tcp-close" in argv and "--lazy-pages" in argv and "--restore-detached" in argv


def test_lazy_daemon_shares_the_restores_work_directory() -> None:
    """The lazy-pages daemon serves the same images from the same work directory (its
    socket is found there by the restore)."""
    argv = lazy_pages_argv("criu", images=Path("/i"), work=Path("/w"))
    assert argv[:2] == ["criu", "lazy-pages"]
    assert argv[argv.index("-D") + 1] == "/i" and argv[argv.index("-W") + 1] == "/w"


def test_restore_tcp_modes() -> None:
    """All connections come back after a suspend, only loopback ones in a copy, none
    when closed."""
    def flags(tcp: str) -> set[str]:
        argv = restore_argv("criu", _config(Path("/s")), images=Path("/i"), work=Path("/w"),
                            pid_file=Path("/p"), inherit=[], tcp=tcp)
        return {a for a in argv if a.startswith("--tcp")}

    assert flags(TCP_ALL) == {"--tcp-established"}
    assert flags(TCP_LOOPBACK) == {"--tcp-established", "--tcp-close-external"}
    assert flags(TCP_NONE) == {"--tcp-close"}


def test_suspend_dump_held_by_the_host_skips_criu_lock() -> None:
    """A suspend whose connections the host holds saves them in repair mode and leaves
    the network alone (no lock table in the sandbox's namespace)."""
    argv = dump_argv("criu", _config(Path("/s/a")), pid=7, images=Path("/i"), work=Path("/w"),
                     freezer=Path("/f"), stdio={}, leave_running=False, tcp_established=True,
                     network_lock=False)
    assert "--tcp-established" in argv and "--leave-running" not in argv
    assert argv[argv.index("--network-lock") + 1] == "skip"
    assert argv.count("--network-lock") == 1


def test_restore_names_no_network_lock() -> None:
    """A restore leaves the lock method to the images (the dump's: skip when the host held
    the connections, nftables in older images); CRIU would ignore the option and warn
    into the restored sandbox's log."""
    argv = restore_argv("criu", _config(Path("/s")), images=Path("/i"), work=Path("/w"),
                        pid_file=Path("/p"), inherit=[], tcp=TCP_ALL)
    assert "--network-lock" not in argv
