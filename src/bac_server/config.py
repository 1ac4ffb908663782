"""Server configuration: one frozen object, read from the environment, overridable by flags.

Every knob has a safe default so ``bac serve`` works with no configuration at all. The
environment variables (``BAC_*``) are the deployment interface; ``bac serve`` flags override
them through :meth:`ServerConfig.with_overrides`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ENVD_VERSION = "0.6.13"


def sandbox_domain(domain: str, scheme: str, port: int | None) -> str:
    """The domain of sandboxes' host names ``{port}-{id}.{domain}`` for a caller who
    reached the server at ``scheme`` and ``port``: the configured one, with that port
    unless it is the scheme's default, so the address works as it is
    (``8080-<id>.localhost:3000``)."""
    default = {"http": 80, "https": 443, "ws": 80, "wss": 443}.get(scheme)
    return domain if port in (None, default) else f"{domain}:{port}"


class ConfigError(ValueError):
    """An environment variable or flag holds a value the server cannot use."""


@dataclass(frozen=True)
class ServerConfig:
    # Loopback only unless configured: exposing the server is a choice (with TLS, below).
    host: str = "127.0.0.1"
    port: int = 3000
    # PEM certificate (chain) and private key: set both and the server speaks HTTPS only
    # (docs/security.md, "Exposing the server"); neither: plain HTTP.
    tls_cert: Path | None = None
    tls_key: Path | None = None
    data_dir: Path = Path("/var/lib/bac")
    # Where built templates live; None means inside ``data_dir`` (tests share one).
    templates_dir: Path | None = None
    # Where promoted artefacts' bytes live; None means ``<data_dir>/artefacts``. Several
    # API replicas share one (docs/scale-out.md).
    artefacts_dir: Path | None = None
    # Base domain for sandbox host names ``{port}-{sandboxId}.{domain}``.
    domain: str = "localhost"
    # Where the MCP endpoint's tools (``/mcp``, docs/agents.md) reach this server's own API,
    # with the caller's key; empty: this host and port over loopback (``self_url``). Set
    # it when the server speaks TLS with a certificate that does not name 127.0.0.1.
    mcp_api_url: str = ""
    # Database URL (BAC_DATABASE_URL): empty means the embedded SQLite file inside
    # ``data_dir``; ``postgresql+asyncpg://user:password@host/db`` puts the state in
    # PostgreSQL (docs/postgresql.md). Any other URL stops the server in one line.
    database_url: str = ""
    # The key file sealing the store's secrets (env vars, access tokens); None means
    # ``data_dir/keys/store.key``, made at the first start. Back it up apart from the database.
    store_key_file: Path | None = None
    default_timeout_s: int = 300
    # The longest timeout a create or a timeout change may ask for, seconds; 0: no cap (the
    # default), and only then may a sandbox be created without an end (timeout 0).
    max_timeout_s: int = 0
    # Teams' own default timeouts, comma-separated ``team=seconds`` (team id or name; 0:
    # their sandboxes have no end unless they ask for one).
    team_timeouts: str = ""
    # The idle policy of sandboxes that ask for none (docs/observability.md, "Lifetime"):
    # pause after this many seconds with no API or gateway traffic and CPU under
    # ``idle_cpu_pct`` %; 0: never. One for sandboxes with an end, one for those without.
    idle_pause_s: int = 0
    idle_pause_no_end_s: int = 900
    idle_cpu_pct: float = 5.0
    # How long the CPU is measured when a sandbox's idle time is up, seconds.
    idle_cpu_window_s: float = 1.0
    # Prometheus metrics (docs/observability.md): ``GET /metrics`` on this ``host:port``
    # of its own (empty: not served); beyond loopback only with a token, which scrapes
    # send as ``Authorization: Bearer <token>``.
    metrics_address: str = "127.0.0.1:9464"
    metrics_token: str = ""
    # The operator's token for the admin routes (the kill switch, docs/observability.md):
    # sent as ``Authorization: Bearer <token>``, at least 32 characters; empty: they are off.
    admin_token: str = ""
    # Teams and templates with series of their own; the rest are counted as "other".
    metrics_max_teams: int = 100
    metrics_max_templates: int = 100
    # The trace (docs/observability.md, "Trace"): events older than this many days are
    # pruned (E2B keeps 7), and of each sandbox's process and transfer reports only the
    # newest ``trace_keep_per_sandbox``; reports each sandbox may send per second (burst).
    trace_retention_days: float = 7.0
    trace_keep_per_sandbox: int = 10_000
    trace_rate_per_s: float = 200.0
    trace_burst: int = 1_000
    # Seconds between reads of each sandbox's egress for the trace's network events (0: none).
    trace_network_interval_s: float = 30.0
    # envd's health (docs/observability.md, "Health"): seconds between the control plane's
    # checks of each running sandbox's envd (0: none), and how long envd must stay silent
    # before the sandbox is marked unhealthy.
    envd_health_interval_s: float = 5.0
    envd_unhealthy_after_s: float = 30.0
    # The trace exported as OpenTelemetry spans (docs/observability.md, "OTLP export"): the
    # OTLP/HTTP traces URL they are POSTed to; empty: no export, nothing of it loaded.
    # ``from_env`` resolves it (:func:`otlp_endpoint_of`). One export's bound (retries
    # included), seconds, and the spans that may wait (more are dropped, counted).
    otlp_endpoint: str = ""
    otlp_timeout_s: float = 10.0
    otlp_queue_size: int = 8192
    default_cpu_count: int = 2
    default_memory_mb: int = 512
    default_disk_mb: int = 10_240
    max_cpu_count: int = 8
    max_memory_mb: int = 8_192
    min_memory_mb: int = 64
    max_sandboxes_per_team: int = 100
    metrics_interval_s: float = 5.0
    metrics_retention_s: int = 86_400
    # The price table (docs/observability.md, "Usage and cost"): per vCPU-second and
    # GiB-second of memory allocated while running, per GiB-hour of checkpoints kept.
    price_vcpu_second: float = 0.000014
    price_memory_gib_second: float = 0.0000045
    price_storage_gib_hour: float = 0.0001
    price_currency: str = "USD"
    # What the vCPU-second price charges: "allocated" (each vCPU while running) or "used"
    # (the CPU time the sandbox's processes took, read from its cgroup).
    price_cpu: str = "allocated"
    # Seconds between two writes of the meter's usage to the store.
    usage_flush_s: float = 5.0
    # Largest JSON body the REST API reads before answering 413.
    max_api_body_bytes: int = 1 << 20
    max_metadata_entries: int = 64
    max_env_vars: int = 256
    max_key_bytes: int = 256
    max_value_bytes: int = 4_096
    # Sandboxes started ahead per hot template, handed out on create (0 disables).
    pool_size: int = 4
    # Network namespaces made ahead while the server is quiet, so that a burst of creates
    # does not make them on its path (about 124 KiB of the kernel's memory each; 0: off).
    netns_stock: int = 64
    # Slots laid out ahead (files, disk, root mount, network namespace) for the restores
    # of each of the last two start snapshots taken or restored, so a burst of creates does not
    # lay them out on its path (0: off).
    slot_stock: int = 32
    # A template asked for faster than that keeps up to this many ahead: as many as the
    # creates of the last window (seconds), so the next burst is handed out (0: fixed).
    pool_max: int = 32
    # Let the kernel merge identical memory pages across sandboxes (KSM): an idle sandbox
    # restored from a start snapshot takes about half the memory, at the cost of the
    # scanner's CPU (at most ksm_max_cpu_pct % of one CPU) and of a side channel between
    # sandboxes (docs/security.md, "Memory merging"): for hosts serving one tenant.
    ksm: bool = False
    ksm_max_cpu_pct: int = 10
    pool_demand_window_s: float = 120.0
    # OCI runtime: "auto" (runc when CRIU >= 4.2 is installed, so sandboxes pause with their
    # memory; crun otherwise), "crun" or "runc".
    runtime: str = "auto"
    # Disk all of a team's checkpoints and snapshots may use, MiB (0: no limit).
    checkpoint_quota_mb: int = 20_480
    # Scheduled checkpoints: the shortest interval a schedule may ask for, seconds.
    min_checkpoint_interval_s: int = 60
    # Templates whose pool is kept warm (comma-separated ids or aliases).
    warm_templates: str = "base"
    # Resolvers the sandboxes' DNS forwarder asks, comma-separated IPv4 addresses
    # (empty: the host's /etc/resolv.conf).
    dns_upstreams: str = ""
    # Comma-separated CIDRs of private or host-network ranges sandboxes may reach anyway
    # (always denied otherwise; each sandbox's own policy still applies).
    egress_exempt: str = ""
    # Registries a build's FROM may pull from although they are on this machine or a
    # private network (refused otherwise): comma-separated ``host`` (any port),
    # ``host:port`` and CIDRs (every address the name resolves to must be in one).
    registry_allow: str = ""
    # Webhook URLs allowed although they point at this machine or a private network
    # (refused otherwise): the same forms as ``registry_allow``.
    webhook_allow: str = ""
    # Webhooks a team may have.
    webhooks_per_team: int = 10
    # Webhook delivery (docs/observability.md): seconds between reads of the event log,
    # one attempt's timeout, attempts at most, the first retry's delay (doubled for each
    # further one, at most webhook_max_backoff_s), and the age after which no attempt is made.
    webhook_poll_s: float = 1.0
    webhook_timeout_s: float = 10.0
    webhook_max_attempts: int = 5
    webhook_backoff_s: float = 10.0
    webhook_max_backoff_s: float = 600.0
    webhook_max_age_s: float = 3600.0
    # CA certificates (PEM) trusted for https webhook receivers besides the host's store.
    webhook_ca_file: Path | None = None
    # CA certificates every sandbox trusts besides its template's own (a TLS-inspecting
    # proxy's, a private CA's): a PEM file, or "host" for the host's trust store; empty:
    # none (docs/security.md, "Trusted CAs inside sandboxes").
    sandbox_ca_certs: str = ""
    # Template builds run at once (each step is a sandbox); the others wait in a queue.
    template_builds: int = 1
    # Keep every template (built-ins from their first create) as a checkpoint of a started,
    # ready sandbox, so their sandboxes are restored instead of booted (docs/templates.md).
    start_snapshots: bool = True
    # How long a start snapshot waits for the template's ready command to succeed, seconds.
    start_snapshot_ready_s: float = 60.0
    # Sandboxes kept restored from a start snapshot per template (and resources) in use
    # (0: restore on each create); each holds its service's memory.
    start_snapshot_pool: int = 1
    # Largest build context (a COPY's uploaded tar) the server accepts, MiB.
    max_upload_mb: int = 2048
    # Disk all of a team's uploaded build contexts may use, MiB (0: no limit).
    upload_quota_mb: int = 10_240
    # An uploaded build context unused this long is deleted, seconds.
    upload_ttl_s: float = 7 * 86_400.0
    # Template storage collection (docs/templates.md): seconds between passes (0: none in
    # the background), and how long layers, images and manifests must have been unused
    # before a pass deletes them.
    gc_interval_s: float = 3_600.0
    gc_grace_s: float = 900.0
    # Prepare the host (cgroups, firewall) at start-up; tests that share a prepared host
    # may turn it off to save time.
    prepare_host: bool = True
    # Set ``favordynmods`` on the host's cgroup2 mount at start-up, so moving a process
    # into a sandbox's cgroups (every resume) does not wait for an RCU grace period.
    cgroup_favordynmods: bool = True
    # The CRIU binary for full-state pauses; empty: /usr/local/sbin/criu (what
    # scripts/build-criu.sh installs), then criu on PATH.
    criu: str = ""
    # Artefacts (docs/volumes-secrets-artefacts.md): disk all of a team's artefacts may
    # use, MiB (0: no limit); days an artefact is kept after its promotion (0: until it is
    # deleted); how long one promotion's copy out of the sandbox may take, seconds.
    artefact_quota_mb: int = 10_240
    artefact_retention_days: float = 30.0
    artefact_copy_timeout_s: float = 600.0
    # Volumes (docs/volumes-secrets-artefacts.md): the size of each volume's file system,
    # MiB (sparse on the host: it costs what is written); what all of a team's volumes may
    # measure together, MiB (0: no bound).
    volume_size_mb: int = 1024
    volume_quota_mb: int = 20_480
    # Desktop streams (docs/desktop.md): the ports of every sandbox that the gateway opens
    # only with a stream token (comma-separated; empty: none), a token's lifetime when the
    # request names none, and the longest one may have, seconds.
    stream_ports: str = "6080"
    stream_token_ttl_s: int = 300
    stream_token_max_ttl_s: int = 3600
    # More than one machine (docs/scale-out.md). ``bac serve``'s role: "all" (one process
    # runs everything, the default) or "api" (a replica of the API and gateway over node
    # agents, on PostgreSQL). The token API replicas and node agents present to each other
    # (at least 32 characters; both roles need the same one).
    role: str = "all"
    node_token: str = ""
    # ``bac node``: where it serves the replicas (its RPC and its tunnel into sandboxes),
    # the host the replicas reach it at (empty: the first address of this host's name),
    # its id (empty: one made at its first start and kept in the data dir), and what it
    # offers (0: the machine's CPUs and memory).
    node_listen: str = "0.0.0.0:7070"
    node_tunnel_listen: str = "0.0.0.0:7071"
    node_advertise: str = ""
    node_id: str = ""
    node_vcpus: int = 0
    node_memory_mb: int = 0
    # ``bac node``: storage every node mounts at this same path, where suspended
    # sandboxes' state is exported so that another node can resume them when this one is
    # lost (docs/scale-out.md, *Paused sandboxes move*); empty: they resume only here.
    node_handover_dir: str = ""
    # Seconds between a node's heartbeats, and the silence after which replicas mark it lost.
    node_heartbeat_s: float = 5.0
    node_lost_after_s: float = 30.0
    # API replicas: seconds between the leader's sweeps for sandboxes no live record
    # claims (destroyed when two sweeps in a row find one so).
    node_sweep_s: float = 60.0

    def __post_init__(self) -> None:
        if self.role not in ("all", "api"):
            raise ConfigError("BAC_ROLE must be all or api")
        if self.node_token and (len(self.node_token) < 32
                                or not self.node_token.isprintable()
                                or self.node_token.strip() != self.node_token):
            raise ConfigError("BAC_NODE_TOKEN must be at least 32 printable characters "
                              "without surrounding spaces (e.g. `openssl rand -hex 32`)")
        if self.min_checkpoint_interval_s < 1:
            raise ConfigError("BAC_MIN_CHECKPOINT_INTERVAL_S must be at least 1")
        if self.node_handover_dir and not Path(self.node_handover_dir).is_absolute():
            raise ConfigError("BAC_NODE_HANDOVER_DIR must be an absolute path (the same on "
                              "every node)")
        if not self.node_sweep_s > 0:
            raise ConfigError("BAC_NODE_SWEEP_S must be more than 0")
        if not 0 < self.node_heartbeat_s < self.node_lost_after_s:
            raise ConfigError("BAC_NODE_HEARTBEAT_S must be more than 0 and less than "
                              "BAC_NODE_LOST_AFTER_S")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError("BAC_TLS_CERT and BAC_TLS_KEY go together: set both or neither")
        if self.admin_token and (len(self.admin_token) < 32
                                 or not self.admin_token.isprintable()
                                 or self.admin_token.strip() != self.admin_token):
            raise ConfigError("BAC_ADMIN_TOKEN must be at least 32 printable characters "
                              "without surrounding spaces (e.g. `openssl rand -hex 32`)")
        for name, low in (("trace_retention_days", 0.0), ("trace_rate_per_s", 0.0)):
            if not getattr(self, name) > low:
                raise ConfigError(f"BAC_{name.upper()} must be more than {low:g}")
        if self.trace_network_interval_s < 0:
            raise ConfigError("BAC_TRACE_NETWORK_INTERVAL_S must be 0 (off) or more")
        if not 0 < self.stream_token_ttl_s <= self.stream_token_max_ttl_s:
            raise ConfigError("BAC_STREAM_TOKEN_TTL_S must be 1..BAC_STREAM_TOKEN_MAX_TTL_S")
        if self.envd_health_interval_s < 0:
            raise ConfigError("BAC_ENVD_HEALTH_INTERVAL_S must be 0 (off) or more")
        if not self.envd_unhealthy_after_s > 0:
            raise ConfigError("BAC_ENVD_UNHEALTHY_AFTER_S must be more than 0")
        for name in ("price_vcpu_second", "price_memory_gib_second", "price_storage_gib_hour"):
            value = getattr(self, name)
            if not 0 <= value < float("inf"):
                raise ConfigError(f"BAC_{name.upper()} must be a finite price of 0 or more")
        if not (0 < len(self.price_currency) <= 16 and self.price_currency.isprintable()):
            raise ConfigError("BAC_PRICE_CURRENCY must be a short name such as USD")
        if self.price_cpu not in ("allocated", "used"):
            raise ConfigError("BAC_PRICE_CPU must be allocated or used")
        if not self.usage_flush_s > 0:
            raise ConfigError("BAC_USAGE_FLUSH_S must be more than 0")
        if self.otlp_endpoint:
            parts = urlsplit(self.otlp_endpoint)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(f"the OTLP endpoint {self.otlp_endpoint!r} is not an "
                                  "http:// or https:// URL")
        if self.mcp_api_url:
            parts = urlsplit(self.mcp_api_url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(f"BAC_MCP_API_URL {self.mcp_api_url!r} is not an http:// "
                                  "or https:// URL")
        if not self.otlp_timeout_s > 0:
            raise ConfigError("BAC_OTLP_TIMEOUT_S must be more than 0")
        if self.artefact_quota_mb < 0 or not 0 <= self.artefact_retention_days < 1e6:
            raise ConfigError("BAC_ARTEFACT_QUOTA_MB and BAC_ARTEFACT_RETENTION_DAYS must be "
                              "0 (no bound) or more")
        if not self.artefact_copy_timeout_s > 0:
            raise ConfigError("BAC_ARTEFACT_COPY_TIMEOUT_S must be more than 0")
        if self.volume_size_mb < 16 or self.volume_quota_mb < 0:
            raise ConfigError("BAC_VOLUME_SIZE_MB must be at least 16 and "
                              "BAC_VOLUME_QUOTA_MB 0 (no bound) or more")
        for name in ("trace_keep_per_sandbox", "trace_burst", "otlp_queue_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"BAC_{name.upper()} must be at least 1")

    @property
    def self_url(self) -> str:
        """Where this server's API is reached from the host it runs on."""
        if self.mcp_api_url:
            return self.mcp_api_url.rstrip("/")
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.host, self.host)
        if ":" in host:
            host = f"[{host}]"
        return f"{'https' if self.tls_cert is not None else 'http'}://{host}:{self.port}"

    def check_multinode(self, what: str) -> None:
        """What an API replica or a node agent needs: PostgreSQL and the node token."""
        if not self.database_url.startswith("postgresql"):
            raise ConfigError(f"{what} needs BAC_DATABASE_URL to name a PostgreSQL database "
                              "(the state its peers share)")
        if not self.node_token:
            raise ConfigError(f"{what} needs BAC_NODE_TOKEN (the same on every replica and "
                              "node)")

    @property
    def template_root(self) -> Path:
        return self.templates_dir if self.templates_dir is not None else self.data_dir

    @property
    def artefacts_root(self) -> Path:
        return self.artefacts_dir if self.artefacts_dir is not None \
            else self.data_dir / "artefacts"

    @property
    def store_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{self.data_dir / 'bac.db'}"

    @property
    def store_key_path(self) -> Path:
        if self.store_key_file is not None:
            return self.store_key_file
        return self.data_dir / "keys" / "store.key"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServerConfig:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            raw = env.get(f"BAC_{field.name.upper()}")
            if raw is not None:
                values[field.name] = _parse(field.name, field.type, raw)
        values["otlp_endpoint"] = otlp_endpoint_of(env)
        return cls(**values)

    def with_overrides(self, **overrides: Any) -> ServerConfig:
        """Apply flag values; ``None`` means "flag not given"."""
        given = {k: v for k, v in overrides.items() if v is not None}
        for key in ("data_dir", "templates_dir", "tls_cert", "tls_key"):
            if key in given:
                given[key] = Path(given[key])
        return dataclasses.replace(self, **given)


def otlp_endpoint_of(env: Mapping[str, str]) -> str:
    """The traces URL the trace is exported to ("": none), by OpenTelemetry's conventions:
    ``BAC_OTLP_ENDPOINT`` first (so an ``OTEL_*`` variable set for another program does not
    decide; ``none`` turns the export off), then ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
    (used as is), then ``OTEL_EXPORTER_OTLP_ENDPOINT``; a base URL (the first and the last)
    gets ``/v1/traces``. ``OTEL_SDK_DISABLED=true`` turns the ``OTEL_*`` ones off."""
    own = env.get("BAC_OTLP_ENDPOINT", "").strip()
    if own:
        return "" if own.lower() == "none" else _signal_url(own)
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ""
    traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return _signal_url(base) if base else ""


def _signal_url(base: str) -> str:
    return base.rstrip("/") + "/v1/traces"


def _parse(name: str, type_name: object, raw: str) -> object:
    kind = str(type_name)
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
        if kind == "bool":
            lowered = raw.strip().lower()
            if lowered in {"1", "true", "yes", "on"}:
                return True
            if lowered in {"0", "false", "no", "off"}:
                return False
            raise ValueError(raw)
        if kind.startswith("Path"):
            return Path(raw)
    except ValueError as exc:
        raise ConfigError(f"BAC_{name.upper()}={raw!r} is not a valid {kind}") from exc
    return raw
