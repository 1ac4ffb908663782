"""Configuration of the namespace backend: one frozen object with safe defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bac_server.backends.egress import SecretLookup
from bac_server.host import LXCFS_DIR, IdRange, default_data_dir
from bac_server.store.sealing import Sealer


@dataclass(frozen=True)
class NamespaceConfig:
    data_dir: Path = field(default_factory=default_data_dir)
    # OCI runtime binary: crun (default), runc, or gVisor's runsc.
    runtime: str = "crun"
    # The runtime's own state (tmpfs: it is meaningless after a reboot anyway).
    runtime_root: Path = Path("/run/bac/runtime")
    id_range: IdRange = field(default_factory=IdRange)
    address_pool: str = "10.202.0.0/16"
    veth_prefix: str = "bacs"
    # Host preparation sets cgroup2's ``favordynmods`` (cheap migrations into cgroups).
    favor_dynamic_cgroups: bool = True
    # The CRIU binary (None: /usr/local/sbin/criu, then PATH; see checkpoint.criu.find_criu).
    criu: str | None = None
    max_vcpus: int = 8
    min_memory_mb: int = 64
    max_memory_mb: int = 8192
    max_pids: int = 32768
    # Each sandbox's disk (its own file system, ``slots._disk``): the size pooled slots
    # are made with (the control plane's default), and the most a create may ask for.
    default_disk_mb: int = 10240
    max_disk_mb: int = 1024 * 1024
    # Pre-started sandboxes kept per hot template (0 disables the pool).
    pool_size: int = 0
    # Sandboxes kept restored from a template's start snapshot per shape in use (0: a
    # create from one restores); each holds its service's memory.
    start_snapshot_pool_size: int = 0
    # Following demand: a key asked for faster than its size keeps up to this many, as
    # many as creates asked for it in the last window (0: fixed sizes).
    # Let KSM merge identical pages across sandboxes (``host._ksm``: a side channel between
    # them; off by default), its scanner bounded to this share of one CPU.
    ksm: bool = False
    ksm_max_cpu_pct: int = 10
    # Network namespaces made ahead while the server is quiet, taken by new slots
    # (``network._netns_stock``; 0: each slot makes its own on its create's path).
    netns_stock: int = 0
    # Slots laid out ahead for the restores of each of the last start snapshots taken or
    # restored (``slots._stock``; 0: each restore lays its own out).
    slot_stock: int = 0
    pool_max: int = 0
    pool_demand_window_s: float = 120.0
    # Seconds to wait for envd to listen, and then to answer /init.
    envd_start_timeout_s: float = 15.0
    envd_init_timeout_s: float = 15.0
    # Import envd's RPC stack before hand-out in pooled sandboxes (first call is fast).
    pool_preload: bool = True
    # Resolvers the sandboxes' DNS forwarder asks (empty: the host's /etc/resolv.conf).
    dns_upstreams: tuple[str, ...] = ()
    # Ranges otherwise always denied (private, link-local, the host's networks) that
    # sandboxes may reach anyway, subject to their own policy. Empty by default.
    egress_exempt: tuple[str, ...] = ()
    # The operator's CA certificates (PEM), added to every sandbox's trust store at its
    # start (``bac_envd._trust``); empty: the templates' own stores as they are.
    ca_certificates: bytes = b""
    # Where the egress relay reads the secrets its rules' placeholders name (the store's
    # lookup); None: a request needing one is refused.
    secret_lookup: SecretLookup | None = None
    # Seals each sandbox's relay CA in its slot, so that a restarted server takes the
    # sandbox back with it (the store's sealer); None: kept in memory only.
    relay_ca_sealer: Sealer | None = None
    # Where LXCFS is mounted (``host.ensure_lxcfs``): its /proc files are bound into each
    # sandbox started while it serves. None: never.
    lxcfs_dir: Path | None = LXCFS_DIR
    # Another data dir whose envd bundles are linked here rather than rebuilt (the one a
    # shared templates dir belongs to); None: every bundle is built in data_dir.
    shared_dir: Path | None = None
    # Storage every node mounts at this same path, where a suspended sandbox's state is
    # exported for another node to take it over (``checkpoint._handover``); None: a
    # paused sandbox resumes only here.
    handover_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.pool_size < 0 or self.start_snapshot_pool_size < 0 or self.pool_max < 0 \
                or self.pool_demand_window_s <= 0 or self.netns_stock < 0 or self.slot_stock < 0:
            raise ValueError("pool and stock sizes must be >= 0")
        if self.max_vcpus < 1 or self.max_memory_mb < self.min_memory_mb or self.max_pids < 16:
            raise ValueError("inconsistent resource maxima")

    @property
    def sandboxes_dir(self) -> Path:
        return self.data_dir / "sandboxes"

    # Host-wide address leases (addresses and veth names are host-wide resources).
    leases_dir: Path = Path("/run/bac/addresses")

    @property
    def claims_dir(self) -> Path:
        return self.data_dir / "claims"

    @property
    def checkpoints_dir(self) -> Path:
        return self.data_dir / "checkpoints"

    @property
    def bundles_dir(self) -> Path:
        return self.data_dir / "envd"

    @property
    def bundle_cache(self) -> Path | None:
        """The shared data dir's bundles dir, when there is one other than ours."""
        if self.shared_dir is None or self.shared_dir == self.data_dir:
            return None
        return self.shared_dir / "envd"
