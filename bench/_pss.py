"""What the memory benchmarks read: a slot's processes (its cgroup), and a process's PSS."""

from __future__ import annotations

from pathlib import Path


def slot_of(data_dir: Path, sandbox_id: str) -> str:
    """The slot a sandbox runs in (its claim, in the server's data dir)."""
    return (data_dir / "claims" / sandbox_id).read_text()


def slot_pids(slot: str) -> list[int]:
    """The processes in a slot's cgroup; none for a slot without one (laid out ahead)."""
    try:
        procs = Path(f"/sys/fs/cgroup/pids/bac/{slot}/cgroup.procs").read_text()
    except FileNotFoundError:
        return []
    return [int(pid) for pid in procs.split()]


def pss_mib(pid: int) -> float:
    """The process's proportional set size, in MiB (0 for one gone meanwhile)."""
    try:
        rows = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return 0.0
    for row in rows:
        if row.startswith("Pss:"):
            return int(row.split()[1]) / 1024
    return 0.0
