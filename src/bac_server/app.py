"""The composition root: the one place that names a concrete backend and store.

``create_app(config)`` returns the ASGI application ``bac serve`` runs: the dispatcher in
front of the gateway and the REST API, with a lifespan that prepares the host, opens the
store (migrating it), builds the backend, and reconciles what survived a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import warnings
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from cryptography import x509
from cryptography.utils import CryptographyDeprecationWarning
from starlette.applications import Starlette
from starlette.types import ASGIApp

from bac_server.api import ApiSettings, build_api
from bac_server.api.mcp import McpRoute
from bac_server.api.scrape import ScrapeConfigError, ScrapeListener, parse_address
from bac_server.backends.base import Backend, Builder, TemplateNotFound
from bac_server.backends.dialing import dialer_of
from bac_server.backends.egress import SecretLookup
from bac_server.backends.namespaces import NamespaceBackend, NamespaceConfig, choose_runtime
from bac_server.config import ENVD_VERSION, ConfigError, ServerConfig
from bac_server.control import (
    Clock,
    ControlPlane,
    HealthSettings,
    Limits,
    TemplateServices,
    TraceSettings,
)
from bac_server.control.artefacts import ArtefactSettings
from bac_server.control.events import DeliverySettings, EventServices, WebhookLimits
from bac_server.control.gc import GcSettings, TemplateGc
from bac_server.control.metering import CpuCharge, PriceTable
from bac_server.control.streams import StreamTokens, parse_ports
from bac_server.control.telemetry import (
    MetricLimits,
    OtlpSettings,
    SpanExport,
    Telemetry,
    otlp_export,
)
from bac_server.control.templates import StartSnapshots
from bac_server.control.volumes import VolumeSettings
from bac_server.dashboard import DashboardSettings, build_dashboard, front_routes
from bac_server.gateway import Dispatcher, Gateway, GatewaySlot
from bac_server.host import Destinations, IdRange, prepare_host, secure_data_dir
from bac_server.nodes import NodeFleet
from bac_server.store import EventRecord, Store
from bac_server.store.key_file import load_sealer
from bac_server.store.sealing import Sealer
from bac_server.store.sql import SqlStore
from bac_server.templates import BuildEngine, RegistryAccess, StorageCollector, TemplateStore

log = logging.getLogger(__name__)


def trace_settings_of(config: ServerConfig) -> TraceSettings:
    return TraceSettings(retention_days=config.trace_retention_days,
                         keep_per_sandbox=config.trace_keep_per_sandbox,
                         rate_per_s=config.trace_rate_per_s, burst=config.trace_burst,
                         network_interval_s=config.trace_network_interval_s)


def limits_of(config: ServerConfig) -> Limits:
    return Limits(
        default_timeout_s=config.default_timeout_s,
        max_timeout_s=config.max_timeout_s,
        default_cpu_count=config.default_cpu_count,
        default_memory_mb=config.default_memory_mb,
        default_disk_mb=config.default_disk_mb,
        max_cpu_count=config.max_cpu_count,
        min_memory_mb=config.min_memory_mb,
        max_memory_mb=config.max_memory_mb,
        max_sandboxes_per_team=config.max_sandboxes_per_team,
        max_metadata_entries=config.max_metadata_entries,
        max_env_vars=config.max_env_vars,
        max_key_bytes=config.max_key_bytes,
        max_value_bytes=config.max_value_bytes,
        max_checkpoint_bytes_per_team=config.checkpoint_quota_mb * 1024 * 1024,
        min_checkpoint_interval_s=config.min_checkpoint_interval_s,
        team_default_timeouts=team_timeouts(config.team_timeouts),
        idle_after_s=config.idle_pause_s,
        idle_after_no_end_s=config.idle_pause_no_end_s,
        idle_cpu_pct=config.idle_cpu_pct,
    )


def team_timeouts(value: str) -> dict[str, int]:
    """``BAC_TEAM_TIMEOUTS``: ``team=seconds`` pairs, comma-separated."""
    found: dict[str, int] = {}
    for pair in _csv(value):
        team, sep, seconds = pair.partition("=")
        if not sep or not team.strip() or not seconds.strip().isdigit():
            raise ConfigError(f"BAC_TEAM_TIMEOUTS: {pair!r} is not team=seconds")
        found[team.strip()] = int(seconds)
    return found


def _csv(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


# The host's trust store (Debian's bundle), what BAC_SANDBOX_CA_CERTS=host names.
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+"
                       rb"-----END CERTIFICATE-----")


def sandbox_ca_of(config: ServerConfig) -> bytes:
    """The CA certificates sandboxes trust besides their template's, as PEM, each block
    checked to be a certificate (one that is not is left out, and a file without any is
    refused at start, naming the setting, rather than found by a sandbox's failed
    handshake)."""
    if not config.sandbox_ca_certs:
        return b""
    path = HOST_CA_BUNDLE if config.sandbox_ca_certs == "host" else \
        Path(config.sandbox_ca_certs)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"BAC_SANDBOX_CA_CERTS: cannot read {path}: {exc.strerror}") \
            from exc
    kept = []
    for n, block in enumerate(_PEM_CERT.findall(text)):
        with warnings.catch_warnings():
            # Old roots a host still trusts (a zero serial): kept as the host keeps them.
            warnings.simplefilter("ignore", CryptographyDeprecationWarning)
            try:
                x509.load_pem_x509_certificate(block)
            except ValueError:
                log.warning("BAC_SANDBOX_CA_CERTS: certificate %d of %s does not parse; "
                            "left out", n + 1, path)
                continue
        kept.append(block + b"\n")
    if not kept:
        raise ConfigError(f"BAC_SANDBOX_CA_CERTS: {path} holds no PEM certificates")
    return b"".join(kept)


def build_backend(config: ServerConfig, secrets: SecretLookup | None = None,
                  sealer: Sealer | None = None, *, node: bool = False) -> NamespaceBackend:
    """``secrets``: what the egress relay resolves the rules' placeholders with;
    ``sealer``: the store's, which seals each sandbox's relay CA in its slot; ``node``:
    for ``bac node`` (with its shared storage for paused sandboxes, if any)."""
    return NamespaceBackend(NamespaceConfig(
        data_dir=config.data_dir, pool_size=config.pool_size, pool_max=config.pool_max,
        netns_stock=config.netns_stock, slot_stock=config.slot_stock,
        ksm=config.ksm, ksm_max_cpu_pct=config.ksm_max_cpu_pct,
        pool_demand_window_s=config.pool_demand_window_s,
        start_snapshot_pool_size=config.start_snapshot_pool,
        runtime=choose_runtime(config.runtime),
        dns_upstreams=_csv(config.dns_upstreams), egress_exempt=_csv(config.egress_exempt),
        favor_dynamic_cgroups=config.cgroup_favordynmods, criu=config.criu or None,
        ca_certificates=sandbox_ca_of(config),
        secret_lookup=secrets, relay_ca_sealer=sealer,
        # The pool warms slots with the disk creates ask for by default (a disk cannot
        # grow at hand-out).
        default_disk_mb=config.default_disk_mb,
        # Templates from another data dir: link the envd bundles built there, too.
        shared_dir=config.templates_dir,
        handover_dir=Path(config.node_handover_dir)
        if node and config.node_handover_dir else None))


async def warm_up(
    backend: NamespaceBackend, templates: TemplateStore, config: ServerConfig
) -> None:
    """Build envd bundles and fill warm pools for the hot templates (in the background)."""
    for ref in filter(None, (t.strip() for t in config.warm_templates.split(","))):
        try:
            await backend.prepare(await templates.get(ref))
        except TemplateNotFound:
            log.warning("template %r is not built; its sandboxes start cold", ref)
        except Exception:
            log.exception("warming template %r failed; its sandboxes start cold", ref)


async def open_store(config: ServerConfig,
                     on_lifecycle_event: Callable[[], None] | None = None,
                     on_logged: Callable[[Sequence[EventRecord]], None] | None = None,
                     ) -> Store:
    """The store, after the data dir was checked private (``host.secure_data_dir``: it
    refuses what it cannot repair), its secrets sealed with the key file (made at the
    first start). ``on_logged``: told every event it logs (the OTLP export)."""
    await asyncio.to_thread(secure_data_dir, config.data_dir, IdRange())
    sealer = await asyncio.to_thread(load_sealer, config.store_key_path)
    return await SqlStore.open(config.store_url, sealer,
                               on_lifecycle_event=on_lifecycle_event, on_logged=on_logged)


def build_span_export(config: ServerConfig) -> SpanExport | None:
    """The trace's OTLP export, None (and the OpenTelemetry SDK never imported) when no
    endpoint is configured."""
    if not config.otlp_endpoint:
        return None
    return otlp_export(OtlpSettings(endpoint=config.otlp_endpoint,
                                    timeout_s=config.otlp_timeout_s,
                                    queue_size=config.otlp_queue_size))


def build_templates(config: ServerConfig) -> TemplateStore:
    """The template store, its builds' FROM registries confined (``RegistryAccess``)."""
    try:
        # The sandboxes' address pool is the backend's (build_backend keeps its default).
        registries = RegistryAccess.parse(config.registry_allow,
                                          refused=(NamespaceConfig.address_pool,))
    except ValueError as exc:
        raise ConfigError(f"BAC_REGISTRY_ALLOW: {exc}") from exc
    return TemplateStore(config.template_root, registries=registries)


async def build_gc(config: ServerConfig, store: Store, backend: Backend,
                   templates: TemplateStore, *, fleet: bool = False) -> TemplateGc:
    """The template storage collector of this data dir (registered as a user of its
    template root, so servers sharing one never collect what another still needs);
    ``fleet``: of the template root that API replicas and node agents share, its live
    layers asked of every node (``backend``, the replicas' ``NodeFleet``)."""
    collector = StorageCollector(templates, data_dir=config.data_dir,
                                 grace_s=config.gc_grace_s, fleet=fleet)
    await asyncio.to_thread(collector.register)
    return TemplateGc(gc_store=store.gc, build_store=store.builds, upload_store=store.uploads,
                      backend=backend, collector=collector,
                      uploads_root=config.data_dir / "template-uploads",
                      settings=GcSettings(interval_s=config.gc_interval_s,
                                          grace_s=config.gc_grace_s,
                                          upload_ttl_s=config.upload_ttl_s))


def build_events(config: ServerConfig, store: Store,
                 wake: asyncio.Event | None = None) -> EventServices:
    """The events API, webhooks and their deliverer; webhook URLs on this machine or a
    private network are refused unless ``BAC_WEBHOOK_ALLOW`` names them."""
    try:
        allowed = Destinations.parse(config.webhook_allow,
                                     refused=(NamespaceConfig.address_pool,))
    except ValueError as exc:
        raise ConfigError(f"BAC_WEBHOOK_ALLOW: {exc}") from exc
    if config.webhook_ca_file is not None and not config.webhook_ca_file.is_file():
        raise ConfigError(f"BAC_WEBHOOK_CA_FILE: {config.webhook_ca_file} is not a file")
    return EventServices.create(
        event_log=store.event_log, sandbox_store=store.sandboxes,
        webhook_store=store.webhooks, allowed=allowed,
        limits=WebhookLimits(max_per_team=config.webhooks_per_team),
        delivery=DeliverySettings(
            poll_s=config.webhook_poll_s, timeout_s=config.webhook_timeout_s,
            max_attempts=config.webhook_max_attempts, backoff_s=config.webhook_backoff_s,
            max_backoff_s=config.webhook_max_backoff_s,
            max_age_s=config.webhook_max_age_s, ca_file=config.webhook_ca_file),
        wake=wake)


def build_scrape(config: ServerConfig, telemetry: Telemetry) -> ScrapeListener | None:
    """The metrics' own listener (None when ``BAC_METRICS_ADDRESS`` is empty)."""
    if not config.metrics_address:
        return None
    try:
        host, port = parse_address(config.metrics_address, config.metrics_token)
    except ScrapeConfigError as exc:
        raise ConfigError(f"BAC_METRICS_ADDRESS: {exc}") from exc
    return ScrapeListener(telemetry, host, port, config.metrics_token)


def create_app(config: ServerConfig, *, clock: Clock | None = None) -> ASGIApp:
    """``clock``: the control plane's (the wall clock unless a simulation brings one)."""
    try:
        streams = StreamTokens(ports=parse_ports(config.stream_ports),
                               ttl_s=config.stream_token_ttl_s,
                               max_ttl_s=config.stream_token_max_ttl_s)
    except ValueError as exc:
        raise ConfigError(f"BAC_STREAM_PORTS: {exc}") from exc
    settings = ApiSettings(
        domain=config.domain, envd_version=ENVD_VERSION, max_body_bytes=config.max_api_body_bytes,
        admin_token=config.admin_token, streams=streams)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        api_only = config.role == "api"
        if config.prepare_host and not api_only:
            await asyncio.to_thread(prepare_host)
        telemetry = Telemetry(MetricLimits(max_teams=config.metrics_max_teams,
                                           max_templates=config.metrics_max_templates))
        scrape = build_scrape(config, telemetry)
        # The store rings it after each lifecycle event it logs; the deliverer wakes.
        logged = asyncio.Event()
        spans = build_span_export(config)
        store = await open_store(config, logged.set,
                                 None if spans is None else spans.logged)
        sealer = await asyncio.to_thread(load_sealer, config.store_key_path)
        backend: NamespaceBackend | NodeFleet
        if api_only:
            # Sandboxes run on node agents (docs/scale-out.md).
            backend = NodeFleet(node_store=store.nodes, token=config.node_token,
                                heartbeat_s=config.node_heartbeat_s,
                                lost_after_s=config.node_lost_after_s)
            await backend.start()
        else:
            backend = build_backend(config, store.secrets.secret_values, sealer)
        templates = build_templates(config)
        start_snapshots = StartSnapshots(
            backend=backend, images=templates, catalog_store=store.catalog,
            build_store=store.builds, root=config.data_dir / "start-snapshots",
            enabled=config.start_snapshots, ready_bound_s=config.start_snapshot_ready_s,
            default_vcpus=config.default_cpu_count, default_memory_mb=config.default_memory_mb)
        # The template storage this process's sandboxes use, or (API replicas) every
        # node's, collected by the leader.
        gc = await build_gc(config, store, backend, templates, fleet=api_only)
        template_services = TemplateServices.create(
            catalog_store=store.catalog, build_store=store.builds, upload_store=store.uploads,
            gc_store=store.gc, images=templates, limits=limits_of(config),
            engine=BuildEngine(templates, backend) if isinstance(backend, Builder) else None,
            uploads_dir=config.data_dir / "template-uploads",
            max_upload_bytes=config.max_upload_mb << 20,
            upload_quota_bytes=config.upload_quota_mb << 20,
            concurrency=config.template_builds, start_snapshots=start_snapshots,
            on_template_deleted=None if gc is None else gc.soon,
            on_build_finished=telemetry.build_finished,
            # Signed alike by every replica sharing the store key (a GET through one, the
            # PUT through another).
            upload_key=sealer.derive("template-uploads"))
        events = build_events(config, store, logged)
        plane = ControlPlane(
            backend=backend,
            templates=template_services,
            key_store=store.keys,
            sandbox_store=store.sandboxes,
            metric_store=store.metrics,
            checkpoint_store=store.checkpoints,
            limits=limits_of(config),
            metrics_interval_s=config.metrics_interval_s,
            metrics_retention_s=config.metrics_retention_s,
            trace_settings=trace_settings_of(config),
            health=HealthSettings(interval_s=config.envd_health_interval_s,
                                  unhealthy_after_s=config.envd_unhealthy_after_s),
            events=events,
            clock=clock,
            idle_cpu_window_s=config.idle_cpu_window_s,
            telemetry=telemetry,
            usage_store=store.usage,
            prices=PriceTable(config.price_vcpu_second, config.price_memory_gib_second,
                              config.price_storage_gib_hour, config.price_currency,
                              CpuCharge(config.price_cpu)),
            usage_flush_s=config.usage_flush_s,
            span_export=spans,
            artefact_store=store.artefacts,
            artefacts_dir=config.artefacts_root,
            secret_store=store.secrets,
            artefact_settings=ArtefactSettings(
                quota_bytes=config.artefact_quota_mb << 20,
                retention_s=config.artefact_retention_days * 86_400,
                copy_timeout_s=config.artefact_copy_timeout_s),
            volume_store=store.volumes,
            volume_settings=VolumeSettings(size_mb=config.volume_size_mb,
                                           quota_mb=config.volume_quota_mb),
            # API replicas follow each other through the store; one leads at a time.
            coordination=store.coordination if api_only else None,
            sweep_s=config.node_sweep_s,
        )
        report = await plane.start()
        warming = asyncio.create_task(
            warm_up(backend, templates, config) if isinstance(backend, NamespaceBackend)
            else asyncio.sleep(0))
        if gc is not None:
            if api_only:
                gc.leads = lambda: plane.lifecycle.leading
            gc.start()
        app.state.plane = plane
        dashboard.state.plane = plane
        mcp.attach(plane)
        gateway = Gateway(plane.registry, waker=plane.route_for_traffic,
                          telemetry=telemetry, streams=streams, dialer=dialer_of(backend),
                          catch_up=None if plane.replicas is None
                          else plane.replicas.catch_up_running,
                          recheck=None if plane.replicas is None
                          else plane.route_after_refusal)
        gateways.attach(gateway)
        if scrape is not None:
            try:
                await scrape.start()
                app.state.scrape = scrape
            except OSError as exc:
                # The sandboxes matter more than their metrics: serve on, say it loudly.
                log.error("metrics are not served: cannot listen on %s: %s",
                          config.metrics_address, exc)
                scrape = None
        log.info(
            "bac server ready: %d sandboxes re-attached, %d cleaned",
            len(report.reattached), len(report.died) + len(report.orphans_destroyed),
        )
        try:
            async with mcp.running():
                yield
        finally:
            warming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await warming
            gateways.detach()
            if scrape is not None:
                await scrape.close()
            try:
                if gc is not None:
                    await gc.close()
                await plane.stop()
                gateway.close()
            finally:
                # Even after a failed step: the warm pool's slots and starts in flight
                # are torn down here, or they outlive the server.
                await backend.close()
                await store.close()

    gateways = GatewaySlot()
    # Mission Control, under /ui/ on the same port (docs/mission-control.md).
    dashboard = build_dashboard(DashboardSettings(
        admin_token=config.admin_token, secure_cookies=config.tls_cert is not None,
        domain=config.domain, streams=streams))
    # The MCP endpoint, /mcp (docs/agents.md): the SDK's MCP server, calling this API.
    mcp = McpRoute(config.self_url)
    api = build_api(None, settings, [mcp.route, *front_routes(dashboard)], lifespan=lifespan)
    return Dispatcher(api, config.domain, gateways)
