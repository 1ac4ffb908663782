"""The contract every isolation backend implements.

The control plane talks to sandboxes only through these types. A backend is
chosen in one place (``bac_server.app``); nothing else names a concrete backend.

Optional capabilities (pause, checkpoint, start snapshots) are separate protocols,
checked with ``isinstance(backend, Pausable)``; a backend never grows methods that raise
"not supported".

Error tree (server side, backend layer)::

    BackendError
    ├── TemplateNotFound      the template's rootfs is not built / unknown
    ├── SandboxNotFound       no such sandbox in this backend
    ├── ResourceLimitError    request exceeds what the backend allows
    ├── SandboxSetupError     a setup step failed; everything it made was torn down
    ├── CheckpointNotFound    no checkpoint with this id
    ├── CheckpointFailed      saving or restoring state failed; the sandbox is as it was
    │                         before the call (or, for a restore, stopped: the message says)
    ├── ServiceNotReady       a start snapshot's ready command never succeeded in its bound
    ├── VolumeMountFailed     a volume could not be bound into a sandbox (the message
    │                         says why: a path crossing a symlink or a file, ...)
    ├── NodeUnreachable       the node that holds the sandbox does not answer (several
    │                         nodes, docs/scale-out.md): it may still run it
    └── NoCapacity            no machine can take the sandbox now (several nodes)
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

from bac_server.backends.egress import EgressPolicy, NetworkUsage

ENVD_PORT = 49983


class BackendError(Exception):
    """Base class of every backend failure."""


class TemplateNotFound(BackendError):
    """The requested template is not available to this backend."""


class SandboxNotFound(BackendError):
    """The backend has no sandbox with this id."""


class ResourceLimitError(BackendError):
    """The request asks for more than the backend allows (the message names the limit)."""


class SandboxSetupError(BackendError):
    """Creating the sandbox failed; every resource it made has been released."""


class CheckpointNotFound(BackendError):
    """The backend holds no checkpoint with this id."""


class CheckpointFailed(BackendError):
    """Saving or restoring a sandbox's state failed (the message says what and where)."""


class ServiceNotReady(BackendError):
    """The template's ready command did not succeed within its bound, or could not run
    (the message says what was seen); no start snapshot was taken."""


class VolumeMountFailed(BackendError):
    """A volume could not be bound at its path in the sandbox (the message says why, in
    the sandbox's terms); the sandbox is as it was."""


class NodeUnreachable(BackendError):
    """The sandbox is on a node that does not answer now; it is neither found nor gone."""


class NoCapacity(BackendError):
    """No machine can take the sandbox now (none active, or none with room for it)."""


class SandboxStatus(enum.Enum):
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"  # its processes are gone (crashed, killed from outside)


class PauseKind(enum.Enum):
    """How a paused sandbox is paused (docs/pause-and-checkpoints.md says which when)."""

    FREEZER = "freezer"  # processes stopped in place, memory resident: fast, not durable
    DISK = "disk"  # processes and memory saved (CRIU), memory freed; survives a reboot
    FILESYSTEM = "filesystem"  # files only: processes end, a resume starts it afresh


@dataclass(frozen=True)
class StartSnapshotRef:
    """A template's start snapshot: a checkpoint (with memory) of a sandbox started from it
    and ready, which its sandboxes continue from (``StartSnapshotter``)."""

    checkpoint_id: str
    token: str  # envd's access token when it was taken (what a hand-out's /init presents)


@dataclass(frozen=True)
class TemplateImage:
    """A built template as a backend consumes it."""

    template_id: str
    rootfs: Path  # read-only lower layer, already shifted to the sandbox uid range
    default_user: str = "user"
    default_workdir: str = "/home/user"
    # SECURITY: no-new-privileges is on unless a template needs setuid binaries (sudo) and
    # says so: a setuid binary then runs with its owner's ids inside the sandbox (still
    # confined by its user namespace). Opt-in only; see docs/security.md.
    allow_setuid: bool = False
    # Built layers stacked over ``rootfs``, topmost first (overlay diffs, same id range).
    lowers: tuple[Path, ...] = ()
    # Environment every process of the sandbox starts with (ENV of a built template);
    # the create request's env vars override these.
    env: tuple[tuple[str, str], ...] = ()
    # Set by the control plane when the template has one: a ``StartSnapshotter`` then makes
    # its sandboxes from it (handed out restored ahead, or restored), else boots them.
    start_snapshot: StartSnapshotRef | None = None
    # A built-in's command run in a started sandbox until it succeeds before its start
    # snapshot is taken (a built template's is its ready command, from its build).
    warm_up: str | None = None

    @property
    def layer_stack(self) -> tuple[Path, ...]:
        """Every read-only layer, topmost first, ``rootfs`` last."""
        return (*self.lowers, self.rootfs)


@dataclass(frozen=True)
class SandboxSpec:
    """Everything a backend needs to make one sandbox."""

    sandbox_id: str  # [a-z0-9]+, also the hostname
    template: TemplateImage
    vcpus: int = 2
    memory_mb: int = 512
    disk_mb: int = 10240
    pids_max: int = 4096
    env_vars: dict[str, str] = field(default_factory=dict)
    envd_access_token: str | None = None
    # What the sandbox may reach (default: the internet, never the host's networks).
    network: EgressPolicy = field(default_factory=EgressPolicy)
    # The volumes it will mount (``VolumeHost.mount_volumes``, after the create): over
    # several machines it is placed where they are.
    volumes: tuple[str, ...] = ()


@dataclass(frozen=True)
class CreateTiming:
    """How ``create`` made a sandbox and how long each part took, in milliseconds."""

    how: str  # "pool" (handed out ready), "start_snapshot" (restored from it), "boot"
    total_ms: float
    # The parts, in order (e.g. {"handout": 3.1} or {"restore": 80.2}); a part that
    # failed and was fallen back from is listed too (e.g. {"restore": 40, "boot": 900}).
    parts_ms: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class SandboxEndpoint:
    """How the host reaches a running sandbox."""

    sandbox_id: str
    address: str  # IP address reachable from the host (any port a sandbox process listens on)
    envd_port: int = ENVD_PORT
    # Set by ``create`` when the template's start snapshot cannot be used any more (its
    # checkpoint is gone or its images incomplete): the sandbox was booted instead, and the
    # snapshot's owner should drop it. A restore that failed otherwise leaves it False.
    start_snapshot_lost: bool = False
    # Set by ``create`` when the backend can tell how it made the sandbox.
    timing: CreateTiming | None = None


@dataclass(frozen=True)
class ResourceUsage:
    cpu_count: int
    cpu_used_pct: float
    mem_used_bytes: int
    mem_total_bytes: int
    mem_cache_bytes: int
    disk_used_bytes: int
    disk_total_bytes: int
    # Processes the kernel's OOM killer ended inside, since the sandbox started (a
    # counter: a rise between two samples is a kill in between).
    oom_kills: int = 0
    # Files (inodes) the disk holds and may hold; 0 where the backend does not count them.
    disk_inodes_used: int = 0
    disk_inodes_total: int = 0
    # The disk has no room left (space or inodes): writes inside fail with ENOSPC.
    disk_full: bool = False
    # Processes inside (envd's included); 0 where the backend does not count them.
    processes: int = 0
    # TCP ports listened on by a non-loopback address (what the gateway can reach),
    # envd's excepted.
    listening_ports: tuple[int, ...] = ()
    # Bytes the sandbox sent and received over its network link (every destination, the
    # host's gateway and resolver included); 0 where the backend does not count them.
    net_bytes_out: int = 0
    net_bytes_in: int = 0
    # Where it went last, newest first, as (host name or address[:port], allowed): names
    # it resolved and connections the egress checks saw (a few; the sandbox's network log
    # has them all).
    recent_destinations: tuple[tuple[str, bool], ...] = ()


class Backend(Protocol):
    """Create, find and destroy sandboxes. All methods are safe to call concurrently."""

    name: str

    async def create(self, spec: SandboxSpec) -> SandboxEndpoint:
        """Make the sandbox and return once envd inside it answers, initialised with
        the spec's token, env vars and default user. Fails closed: on any error every
        resource made so far is released and ``SandboxSetupError`` is raised. (A
        ``StartSnapshotter`` makes it from ``spec.template.start_snapshot`` when set.)"""
        ...

    async def destroy(self, sandbox_id: str) -> None:
        """Kill every process and remove every mount, cgroup, netns, veth and file the
        sandbox made. Idempotent: destroying an unknown sandbox is not an error."""
        ...

    async def status(self, sandbox_id: str) -> SandboxStatus:
        """Raises ``SandboxNotFound`` for an unknown id."""
        ...

    async def endpoint(self, sandbox_id: str) -> SandboxEndpoint:
        """Raises ``SandboxNotFound`` for an unknown id."""
        ...

    async def list(self) -> list[str]:
        """Ids of every sandbox this backend holds on this host, including ones made
        before a server restart (used to re-attach and to clean up)."""
        ...

    async def usage(self, sandbox_id: str) -> ResourceUsage:
        ...

    async def close(self) -> None:
        """Release in-process resources (sandboxes keep running)."""
        ...


@dataclass(frozen=True)
class BuildStep:
    """One command of a template build, run in a sandbox isolated like any other."""

    lowers: tuple[Path, ...]  # read-only layers, topmost first; the last is a whole rootfs
    upper: Path  # must not exist (its parent must); becomes the step's layer (overlay diff)
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    user: str = "root"  # name, uid or uid:gid, looked up in the step's own /etc/passwd
    cwd: str = "/"  # made when missing, like a Dockerfile WORKDIR
    # Host directories bound read-only into the step: (host path, absolute sandbox path).
    binds: tuple[tuple[Path, str], ...] = ()
    vcpus: int = 2
    memory_mb: int = 2048
    timeout_s: float = 3600.0
    network: EgressPolicy = field(default_factory=EgressPolicy)


OutputCallback = Callable[[str, str], None]  # (stream "stdout" | "stderr", line)

# (sandbox id, one raw report from inside that sandbox). The backend names the sandbox by
# the channel the report came on, never by its contents; the bytes are untrusted.
TraceSink = Callable[[str, bytes], None]


@runtime_checkable
class Traced(Protocol):
    """Backends whose sandboxes' envd reports each process it ran and each file transfer
    (one JSON object per report, ``bac_envd._trace``) over a per-sandbox host channel."""

    def trace_to(self, sink: TraceSink | None) -> None:
        """Hand every report from now on to ``sink`` (None: drop them)."""
        ...


@runtime_checkable
class CpuMetered(Protocol):
    """Backends that read a running sandbox's CPU time cheaply enough to meter it (the
    price table's used-CPU mode): one small read, no walk, no thread."""

    def cpu_seconds(self, sandbox_id: str) -> float | None:
        """The CPU time the sandbox's processes have used since its processes were last
        started or restored (a resume may start the count again from zero); None when it
        has no running processes to read (unknown, paused to disk, gone)."""
        ...


@runtime_checkable
class Builder(Protocol):
    """Backends that run template build steps."""

    async def run_build_step(self, step: BuildStep, output: OutputCallback) -> int:
        """Run ``step.argv`` on an overlay of ``step.lowers`` whose writable layer is
        ``step.upper``; report each output line; return the exit code (-signal when killed,
        e.g. at ``timeout_s``). ``upper`` keeps what the command wrote, owned within the
        sandbox id range, whiteouts included. Fails closed (``SandboxSetupError``);
        cancelling kills the command and releases everything but ``upper``."""
        ...


@runtime_checkable
class Pausable(Protocol):
    """Backends that can stop a sandbox's processes and continue them later."""

    async def pause(self, sandbox_id: str) -> None: ...

    async def resume(self, sandbox_id: str) -> SandboxEndpoint: ...


@runtime_checkable
class FleetPausable(Protocol):
    """Backends that freeze many sandboxes at once (the operator's kill switch): what
    ``Pausable.pause`` does to each, started for all of them together."""

    async def pause_all(self, sandbox_ids: Sequence[str]) -> dict[str, str]:
        """Freeze every one; returns those that could not be paused, with why (a reason
        for the operator, no host paths)."""
        ...


@runtime_checkable
class NetworkControl(Protocol):
    """Backends whose sandboxes' egress policy can change while they run, with counters."""

    async def set_network(self, sandbox_id: str, policy: EgressPolicy) -> None:
        """Replace the policy; new connections follow it at once."""
        ...

    async def network_usage(self, sandbox_id: str) -> NetworkUsage: ...


@dataclass(frozen=True)
class CheckpointInfo:
    """A saved state of a sandbox, on disk, independent of the sandbox's lifetime."""

    checkpoint_id: str
    sandbox_id: str  # the sandbox it was taken from
    created_at: datetime
    size_bytes: int  # disk used by the checkpoint (files + memory images)
    memory: bool  # processes and memory saved too (False: files only)


@runtime_checkable
class Checkpointable(Protocol):
    """Backends that save sandbox state to disk and bring it back.

    *Suspend* stops a sandbox and frees its memory: with ``memory=True`` its processes,
    memory, sockets and files are saved and ``wake`` continues them where they were; with
    ``memory=False`` only its files are kept and ``wake`` starts it fresh on them.
    *Checkpoints* are named states taken while a sandbox keeps running; a sandbox can be
    rolled back to one (``restore``) and new sandboxes can start from one (``create_from``:
    snapshots and forks). ``memory_checkpoints`` is False on hosts lacking what saving
    memory needs; then only ``memory=False`` is available.
    """

    memory_checkpoints: bool

    async def suspend(self, sandbox_id: str, *, memory: bool) -> int:
        """Returns the bytes of saved memory state written (0 with ``memory=False``, or
        for a sandbox suspended already)."""
        ...

    async def wake(self, spec: SandboxSpec, *, memory: bool = True) -> SandboxEndpoint:
        """Continue a suspended sandbox. ``spec`` (same id, token and env vars) is what a
        fresh start needs (files-only suspend, or ``memory=False`` to discard memory)."""
        ...

    async def checkpoint(self, sandbox_id: str, checkpoint_id: str, *,
                         memory: bool) -> CheckpointInfo: ...

    async def restore(self, spec: SandboxSpec, checkpoint_id: str) -> SandboxEndpoint:
        """Roll the running or suspended sandbox ``spec.sandbox_id`` back to a checkpoint."""
        ...

    async def create_from(self, spec: SandboxSpec, checkpoint_id: str, *,
                          source_token: str | None) -> SandboxEndpoint:
        """A new sandbox (own id, address, network) continuing from a checkpoint.
        ``source_token`` is the envd token in force when it was taken."""
        ...

    async def delete_checkpoint(self, checkpoint_id: str) -> None:
        """Idempotent."""
        ...


@dataclass(frozen=True)
class VolumeBind:
    """One volume bound into a sandbox: its host storage's id and the absolute path inside."""

    volume_id: str
    path: str


@runtime_checkable
class VolumeHost(Protocol):
    """Backends that keep volumes on this host and bind them into sandboxes.

    A volume is a file system of a bounded size of its own, made by ``make_volume`` and
    kept until ``drop_volume``; ``volume_dir`` is the host directory of its content (what
    sandboxes see at their mount path), reachable only by the server. A bind outlives
    pauses and restarts of the server: the backend binds it again where a sandbox's
    processes start afresh, and names it external to CRIU (not saved in checkpoints)."""

    async def make_volume(self, volume_id: str, size_mb: int) -> None:
        """Make (idempotent) and mount its file system. ``OSError`` when it cannot."""
        ...

    async def volume_dir(self, volume_id: str) -> Path:
        """The directory of its content, mounted (again, after a reboot) when it is not.
        ``OSError`` (``ENOENT``) for a volume never made."""
        ...

    async def drop_volume(self, volume_id: str) -> None:
        """Unmount and delete it (lazily detached while something still holds it).
        Idempotent."""
        ...

    async def mount_volumes(self, sandbox_id: str, binds: Sequence[VolumeBind]) -> None:
        """Bind each volume at its path in the running sandbox (made, owned by its root,
        when missing; a bind already there is kept). ``VolumeMountFailed`` when a path
        cannot take it; ``SandboxNotFound`` for an unknown id."""
        ...


@dataclass(frozen=True)
class RelayedAnswer:
    """An answer of the machine that holds a volume (``VolumeRelay``): its body streamed,
    ``close`` called once it is read or abandoned."""

    status: int
    headers: list[tuple[str, str]]
    body: AsyncIterator[bytes]
    close: Callable[[], Awaitable[None]]


@runtime_checkable
class VolumeRelay(Protocol):
    """Volume hosts whose volumes live on other machines (``bac node``): the volume
    content API is served by the machine holding the volume, and ``volume_dir`` names a
    directory there, not here."""

    async def relay_volume(self, volume_id: str, method: str, path: str, query: str,
                           headers: Sequence[tuple[str, str]],
                           body: AsyncIterator[bytes]) -> RelayedAnswer:
        """The content API's request (``path``: ``file``, ``dir`` or ``path``; the
        caller has checked the volume's token) answered by the volume's machine."""
        ...

    async def volumes_together(self, volume_ids: Sequence[str]) -> None:
        """``VolumeMountFailed`` unless one machine holds them all (a sandbox mounts the
        volumes of its own machine only)."""
        ...


@runtime_checkable
class LayerHolder(Protocol):
    """Backends whose sandboxes, build steps and checkpoints mount template layers.

    The template garbage collector deletes no layer or rootfs this reports."""

    async def layers_in_use(self) -> frozenset[Path]:
        """Every read-only layer and base rootfs that a sandbox or build step of this
        backend mounts or will mount again (running, paused, pooled, being created or torn
        down), or that a checkpoint needs to be restored. Raises ``BackendError`` when a
        record cannot be read: the caller cannot know what that one uses."""
        ...


@runtime_checkable
class StartSnapshotter(Protocol):
    """Backends that keep a template as a checkpoint of a started, ready sandbox (a start
    snapshot) and create its sandboxes from it.

    ``create`` of a spec whose ``template.start_snapshot`` is set hands out a sandbox
    restored from it ahead when one fits (same snapshot, resources and disk, the default
    egress policy), else restores one, else (the restore failed) boots; a sandbox from a
    snapshot gets its own id, hostname, token, env vars, limits and egress policy, like
    any. Which sandboxes are kept restored ahead, and how many, is the backend's.
    ``takes_start_snapshots`` is False on hosts that cannot save a sandbox's memory.
    """

    @property
    def takes_start_snapshots(self) -> bool: ...

    async def take_start_snapshot(self, image: TemplateImage, checkpoint_id: str, *,
                                  token: str, vcpus: int, memory_mb: int,
                                  ready_cmd: str | None,
                                  ready_bound_s: float) -> CheckpointInfo:
        """Start an internal sandbox of ``image`` (envd token ``token``, its own id, no
        pool), wait until ``ready_cmd`` succeeds in it (the template's user and working
        directory; at most ``ready_bound_s``), checkpoint it with its memory as
        ``checkpoint_id``, and destroy it. Raises ``ServiceNotReady`` (the command never
        succeeded), another ``BackendError`` or ``OSError``; nothing is left behind but,
        after a crash, a checkpoint named ``checkpoint_id``."""
        ...

    async def delete_start_snapshot(self, checkpoint_id: str) -> None:
        """Destroy the sandboxes kept restored from it and delete it. Idempotent."""
        ...


# (sandbox ids, reachable): what a ``NodesWatched`` backend says when the node holding
# those sandboxes is lost (False) or back (True).
class NodeWatcher(Protocol):
    """Told which sandboxes became unreachable (``reachable`` False: their node is lost)
    or reachable again: their node is back, or ``moved``, resumed on another node (by
    this process when ``mover``, which then says so once for all; else found moved)."""

    async def __call__(self, sandbox_ids: Sequence[str], reachable: bool, *,
                       moved: bool = False, mover: bool = False) -> None: ...


@runtime_checkable
class NodesWatched(Protocol):
    """Backends whose sandboxes run on other machines (docs/scale-out.md), which may stop
    answering and come back."""

    def watch(self, watcher: NodeWatcher) -> None:
        """Tell ``watcher`` from now on."""
        ...


@runtime_checkable
class TakesOver(Protocol):
    """A machine that can start a suspended sandbox whose own machine is lost, from its
    state on storage they share (``bac node`` with ``BAC_NODE_HANDOVER_DIR``)."""

    async def take_over(self, spec: SandboxSpec, *, memory: bool = True) -> SandboxEndpoint:
        """Run here the suspended sandbox ``spec``, as its wake would have (``memory``
        False: afresh on its files); raises ``CheckpointNotFound`` when no complete state
        of it is on the shared storage."""
        ...
