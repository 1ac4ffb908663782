"""One sandbox slot on disk: its lifecycle phase, resources and paths.

A *slot* is the host-side unit (runtime container id, cgroup, mount, veth); a sandbox id
is bound to it when it is handed out, which lets pre-started slots serve any id. The
record is rewritten atomically at every phase change, so a restarted server finds every
slot again and knows how far it got.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bac_server.backends.base import PauseKind
from bac_server.host import write_private

DEFAULT_DISK_MB = 10240


class SlotPhase(enum.Enum):
    CREATING = "creating"  # resources being made; not usable
    POOLED = "pooled"  # envd listening, no sandbox id, waiting in the ready pool
    ASSIGNING = "assigning"  # being bound to a sandbox id (hostname, limits, /init)
    RUNNING = "running"
    PAUSED = "paused"
    DESTROYING = "destroying"
    BUILDING = "building"  # a template build step runs (no sandbox id, never re-attached)


TRANSITIONS: dict[SlotPhase, frozenset[SlotPhase]] = {
    SlotPhase.CREATING: frozenset({SlotPhase.POOLED, SlotPhase.ASSIGNING, SlotPhase.BUILDING,
                                   SlotPhase.DESTROYING}),
    SlotPhase.POOLED: frozenset({SlotPhase.ASSIGNING, SlotPhase.DESTROYING}),
    SlotPhase.ASSIGNING: frozenset({SlotPhase.RUNNING, SlotPhase.DESTROYING}),
    SlotPhase.RUNNING: frozenset({SlotPhase.PAUSED, SlotPhase.DESTROYING}),
    SlotPhase.PAUSED: frozenset({SlotPhase.RUNNING, SlotPhase.DESTROYING}),
    SlotPhase.DESTROYING: frozenset(),
    SlotPhase.BUILDING: frozenset({SlotPhase.DESTROYING}),
}


class IllegalTransition(RuntimeError):
    pass


@dataclass
class SlotRecord:
    slot: str
    phase: SlotPhase
    template_id: str
    template_rootfs: str
    envd_bundle: str
    lease_index: int
    host_address: str
    sandbox_address: str
    veth: str
    cgroup_path: str
    owner: str
    vcpus: int
    memory_mb: int
    pids_max: int
    disk_mb: int = DEFAULT_DISK_MB
    sandbox_id: str | None = None
    init_pid: int | None = None
    init_start: int | None = None
    created_at: float = field(default_factory=time.time)
    # How a PAUSED slot is paused; None otherwise.
    paused_to: PauseKind | None = None
    # Every read-only layer, topmost first, the template's rootfs last. Empty in records
    # written before layered templates: then ``template_rootfs`` alone is the stack.
    layers: list[str] = field(default_factory=list)
    # Build slots: the step's upper layer (kept by teardown) and the overlay work
    # directory beside it (removed by teardown). None for sandbox slots.
    upper_dir: str | None = None
    work_dir: str | None = None
    # Volumes bound into the sandbox, [host directory, path inside] (``volumes._attach``):
    # bound again when its processes start afresh.
    volumes: list[list[str]] = field(default_factory=list)
    # The name of the suspended sandbox's export on the shared storage, while it has one
    # (``checkpoint._handover``).
    handover: str | None = None

    @property
    def layer_stack(self) -> tuple[Path, ...]:
        return tuple(Path(p) for p in self.layers) or (Path(self.template_rootfs),)

    def move(self, phase: SlotPhase) -> None:
        if phase not in TRANSITIONS[self.phase]:
            raise IllegalTransition(f"slot {self.slot}: {self.phase.value} -> {phase.value}")
        self.phase = phase

    def to_json(self) -> str:
        data: dict[str, Any] = dataclasses.asdict(self)
        data["phase"] = self.phase.value
        data["paused_to"] = None if self.paused_to is None else self.paused_to.value
        return json.dumps(data, indent=1)

    @classmethod
    def from_json(cls, text: str) -> SlotRecord:
        data = json.loads(text)
        data["phase"] = SlotPhase(data["phase"])
        if data.get("paused_to") is not None:
            data["paused_to"] = PauseKind(data["paused_to"])
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class SlotPaths:
    root: Path  # <data>/sandboxes/<slot>, 0710 root:<sandbox root gid>

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def rootfs(self) -> Path:  # overlay mount point
        return self.root / "rootfs"

    @property
    def layer(self) -> Path:  # 0700: upper + work of the overlay, on the slot's disk
        return self.root / "layer"

    @property
    def disk(self) -> Path:  # 0600: the image of the slot's disk, mounted at ``layer``
        return self.root / "disk.img"

    @property
    def binds(self) -> Path:  # build slots: host directories bound here before the runtime
        return self.root / "binds"

    @property
    def etc(self) -> Path:  # files bound over /etc/hosts and /etc/hostname
        return self.root / "etc"

    @property
    def trace(self) -> Path:  # bound read-only at /run/bac: envd's trace socket
        return self.root / "trace"

    @property
    def envd_log(self) -> Path:
        return self.root / "envd.log"

    @property
    def runtime_log(self) -> Path:
        return self.root / "runtime.log"

    @property
    def pid_file(self) -> Path:
        return self.root / "init.pid"


def save_record(paths: SlotPaths, record: SlotRecord) -> None:
    write_private(paths.state, record.to_json())


def load_record(paths: SlotPaths) -> SlotRecord | None:
    try:
        return SlotRecord.from_json(paths.state.read_text())
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, KeyError):
        return None
