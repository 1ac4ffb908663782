"""What a collection of template storage found, deleted (or would delete) and kept."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class LiveRefs:
    """What must stay, as the caller knows it: the digests of built templates something
    can still start from (tagged ready builds, builds sandboxes are pinned to), and every
    layer or rootfs path a backend's sandboxes, build steps or checkpoints mount."""

    digests: frozenset[str] = frozenset()
    paths: frozenset[Path] = frozenset()


@dataclass(frozen=True)
class Freed:
    kind: str  # layer | image | builtin | manifest
    name: str
    size: int  # bytes on disk
    unreferenced_s: float = 0.0  # how long collections have seen it unreferenced


@dataclass
class StorageReport:
    root: Path
    dry_run: bool
    # Why nothing was collected (another data dir uses the root, a build is running);
    # None when the collection ran.
    skipped: str | None = None
    deleted: list[Freed] = field(default_factory=list)  # or, in a dry run, would be
    waiting: list[Freed] = field(default_factory=list)  # unreferenced, in quarantine
    busy: list[str] = field(default_factory=list)  # due, but being built right now
    kept: dict[str, int] = field(default_factory=dict)  # referenced entries, by kind
    stale_locks: int = 0
    scanned: int = 0
    took_s: float = 0.0
    next_due_s: float | None = None  # seconds until the next waiting entry is due

    @property
    def freed_bytes(self) -> int:
        return sum(f.size for f in self.deleted)

    @property
    def waiting_bytes(self) -> int:
        return sum(f.size for f in self.waiting)
