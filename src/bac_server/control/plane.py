"""The control plane as one object: its services, wired, plus start-up and shut-down.

``bac_server.app`` makes the template services (:class:`TemplateServices`: catalog,
resolver, uploads, builds, start snapshots) and hands them to :class:`ControlPlane`, which
makes the sandboxes' and checkpoints' services over the same stores and resolves every
create's template through the template services' resolver. What spans both halves (a
template deleted, else a snapshot of that name) is the plane's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bac_server.backends.base import Backend, CpuMetered, NodesWatched, Traced
from bac_server.backends.dialing import dialer_of
from bac_server.control.artefacts import Artefacts, ArtefactSettings, Blobs
from bac_server.control.builds import STALE_AFTER_S, TemplateBuilds
from bac_server.control.checkpoints import Checkpoints, Snapshots
from bac_server.control.clock import Clock, SystemClock
from bac_server.control.errors import InvalidRequest, NotFound
from bac_server.control.events import EventServices
from bac_server.control.keys import KeyService, Team
from bac_server.control.limits import Limits
from bac_server.control.metering import CostCaps, CpuCharge, Meter, PriceTable, UsageReports
from bac_server.control.sandboxes import (
    LIVE_STATES,
    ChangeFeed,
    Creator,
    HealthSettings,
    HealthWatch,
    History,
    KillSwitch,
    Lifecycle,
    MetricsSampler,
    NetworkService,
    ReconcileReport,
    Registry,
    Replicas,
    Route,
    SandboxState,
    StepLeases,
    Traces,
    TraceSettings,
    envd_prober,
    reconcile,
)
from bac_server.control.secrets import Secrets
from bac_server.control.telemetry import SpanExport, Telemetry
from bac_server.control.templates import (
    BuiltImages,
    StartSnapshots,
    TemplateCatalog,
    TemplateResolver,
    UploadQuota,
    Uploads,
    is_finished,
    split_ref,
)
from bac_server.control.volumes import Volumes, VolumeSettings
from bac_server.store import (
    ArtefactStore,
    BuildStore,
    CatalogStore,
    CheckpointStore,
    Coordination,
    GcStore,
    KeyStore,
    MetricStore,
    SandboxStore,
    SecretStore,
    TemplateRecord,
    UploadStore,
    UsageStore,
    VolumeStore,
)
from bac_server.templates import BuildEngine

log = logging.getLogger(__name__)


@dataclass
class TemplateServices:
    catalog: TemplateCatalog
    resolver: TemplateResolver
    uploads: Uploads
    builds: TemplateBuilds
    gc_store: GcStore
    start_snapshots: StartSnapshots | None = None
    # The leader's loop ending the builds of replicas that are gone (several replicas).
    _stale: asyncio.Task[None] | None = field(default=None, init=False, repr=False,
                                              compare=False)

    @classmethod
    def create(cls, *, catalog_store: CatalogStore, build_store: BuildStore,
               upload_store: UploadStore, gc_store: GcStore, images: BuiltImages,
               engine: BuildEngine | None, limits: Limits, uploads_dir: Path,
               max_upload_bytes: int, upload_quota_bytes: int = 0, concurrency: int,
               start_snapshots: StartSnapshots | None = None,
               on_template_deleted: Callable[[], None] | None = None,
               on_build_finished: Callable[[str, float], None] | None = None,
               upload_key: bytes | None = None,
               ) -> TemplateServices:
        """``upload_quota_bytes``: what each team's uploads may use together (0: no
        quota); ``on_template_deleted``: called after each delete (the collector's
        ``soon``); ``on_build_finished(outcome, seconds)`` after each build;
        ``upload_key``: what upload URLs are signed with (None: a key of this process's,
        which no other replica shares)."""
        catalog = TemplateCatalog(catalog_store=catalog_store, build_store=build_store,
                                  limits=limits, on_delete=on_template_deleted)
        resolver = TemplateResolver(images=images, catalog_store=catalog_store, catalog=catalog)
        quota = UploadQuota(upload_store, upload_quota_bytes) if upload_quota_bytes > 0 \
            else None
        uploads = Uploads(uploads_dir, upload_store, max_bytes=max_upload_bytes, quota=quota,
                          key=upload_key)
        builds = TemplateBuilds(build_store=build_store, engine=engine, catalog=catalog,
                                resolver=resolver, uploads=uploads, limits=limits,
                                concurrency=concurrency, start_snapshots=start_snapshots,
                                on_finished=on_build_finished)
        return cls(catalog, resolver, uploads, builds, gc_store, start_snapshots)

    async def start(self, *, replicated: bool = False) -> None:
        """End builds a previous process left unfinished; forget pins of gone sandboxes.
        ``replicated`` (the leader of several replicas): only builds no replica runs any
        more (untouched for ``STALE_AFTER_S``), now and from now on."""
        ended = await self.builds.recover(STALE_AFTER_S if replicated else None)
        if ended:
            log.warning("%d template builds were interrupted by the restart", len(ended))
        await self.gc_store.prune_pins([s.value for s in LIVE_STATES])
        if replicated and self._stale is None:
            self._stale = asyncio.create_task(self._end_stale_builds())

    async def _end_stale_builds(self) -> None:
        while True:
            await asyncio.sleep(STALE_AFTER_S / 3)
            try:
                ended = await self.builds.recover(STALE_AFTER_S)
            except Exception as exc:
                log.warning("ending the builds of gone replicas failed: %s", exc)
                continue
            if ended:
                log.warning("%d template builds ended: their replica is gone", len(ended))

    async def close(self) -> None:
        if self._stale is not None:
            self._stale.cancel()
            await asyncio.gather(self._stale, return_exceptions=True)
        await self.builds.close()
        if self.start_snapshots is not None:
            await self.start_snapshots.close()

    async def delete(self, team: Team, ref: str) -> TemplateRecord | None:
        """Delete the team's template (cancelling its unfinished builds first)."""
        template = await self.catalog.find(team, split_ref(ref)[0], own=True)
        if template is None:
            return None
        unfinished = [b for b in await self.catalog.builds(template)
                      if not is_finished(b.status)]
        await asyncio.gather(*(self.builds.cancel(team, template.template_id, b.build_id)
                               for b in unfinished), return_exceptions=True)
        deleted = await self.catalog.delete(team, template.template_id)
        if self.start_snapshots is not None:
            await self.start_snapshots.forget(template.template_id)
        return deleted


class ControlPlane:
    def __init__(
        self,
        *,
        backend: Backend,
        templates: TemplateServices,
        key_store: KeyStore,
        sandbox_store: SandboxStore,
        metric_store: MetricStore,
        checkpoint_store: CheckpointStore,
        limits: Limits,
        metrics_interval_s: float = 5.0,
        metrics_retention_s: float = 86_400,
        trace_settings: TraceSettings | None = None,
        health: HealthSettings | None = None,
        events: EventServices | None = None,
        clock: Clock | None = None,
        idle_cpu_window_s: float = 1.0,
        telemetry: Telemetry | None = None,
        usage_store: UsageStore | None = None,
        prices: PriceTable | None = None,
        usage_flush_s: float = 5.0,
        cap_check_s: float = 0.5,
        span_export: SpanExport | None = None,
        artefact_store: ArtefactStore | None = None,
        artefacts_dir: Path | None = None,
        artefact_settings: ArtefactSettings | None = None,
        volume_store: VolumeStore | None = None,
        volume_settings: VolumeSettings | None = None,
        secret_store: SecretStore | None = None,
        coordination: Coordination | None = None,
        sweep_s: float = 60.0,
    ) -> None:
        """``usage_store``: where the meter writes what sandboxes use (None: no
        metering). ``artefact_store`` and ``artefacts_dir``: where artefacts' rows and
        bytes are kept (either None: no artefacts). ``clock``: what lifetimes are
        measured and scheduled by (the wall clock unless a simulation brings its own).
        ``span_export``: the trace's OTLP export, which the store feeds every event it
        logs (None: none); started and flushed with the plane."""
        self.backend = backend
        self.templates = templates
        self.sandbox_store = sandbox_store
        self.limits = limits
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.registry = Registry(self.clock)
        # The registry's changes to whoever follows them live (Mission Control's fleet).
        self.feed = ChangeFeed(self.registry)
        # The Prometheus metrics: fed by the lifecycle, reading the registry at each scrape.
        self.telemetry = telemetry
        if telemetry is not None:
            telemetry.watch(self.registry, self.clock)
        self.span_export = span_export
        if span_export is not None:
            span_export.watch(self.registry)
            if telemetry is not None:
                telemetry.count_spans(span_export.counts)
        self.keys = KeyService(key_store)
        source = templates.resolver
        self.lifecycle = Lifecycle(
            backend=backend, sandbox_store=sandbox_store, registry=self.registry, limits=limits,
            templates=source, clock=self.clock, idle_cpu_window_s=idle_cpu_window_s,
            observer=telemetry,
        )
        self.creator = Creator(
            backend=backend,
            templates=source,
            sandbox_store=sandbox_store,
            checkpoint_store=checkpoint_store,
            registry=self.registry,
            lifecycle=self.lifecycle,
            limits=limits,
            start_snapshots=templates.start_snapshots,
            observer=telemetry,
        )
        self.history = History(sandbox_store=sandbox_store, metric_store=metric_store,
                               registry=self.registry)
        # The operator's kill switch (docs/observability.md, "Kill switch").
        self.kill_switch = KillSwitch(backend=backend, sandbox_store=sandbox_store,
                                      registry=self.registry, lifecycle=self.lifecycle)
        self.checkpoints = Checkpoints(
            backend=backend, checkpoint_store=checkpoint_store, sandbox_store=sandbox_store,
            registry=self.registry, lifecycle=self.lifecycle, limits=limits,
            templates=source,
        )
        self.snapshots = Snapshots(
            checkpoints=self.checkpoints, creator=self.creator,
            checkpoint_store=checkpoint_store, sandbox_store=sandbox_store,
            registry=self.registry,
        )
        self.network = NetworkService(backend=backend, sandbox_store=sandbox_store,
                                      registry=self.registry)
        self.sampler = MetricsSampler(
            backend=backend,
            metric_store=metric_store,
            registry=self.registry,
            interval_s=metrics_interval_s,
            retention_s=metrics_retention_s,
            sandbox_store=sandbox_store,
            on_died=self.lifecycle.died,
        )
        self._sampler_task: asyncio.Task[None] | None = None
        self._lost_at_start: list[str] = []
        self._caps_task: asyncio.Task[None] | None = None
        self.traces = Traces(sandbox_store=sandbox_store, registry=self.registry,
                             history=self.history, settings=trace_settings, backend=backend)
        self.registry.on_gone(self.traces.intake.forget)
        # Each running sandbox's envd checked; its changes of health are trace events.
        self.health = HealthWatch(registry=self.registry, sandbox_store=sandbox_store,
                                  settings=health or HealthSettings(),
                                  probe=envd_prober(dialer_of(backend)),
                                  on_change=self.traces.changes.notify)
        self._health_task: asyncio.Task[None] | None = None
        # The events API, webhooks and their deliverer (None: the plane has none).
        self.events = events
        # Usage and cost (docs/observability.md, "Usage and cost").
        self.prices = prices if prices is not None else PriceTable()
        self.meter = None if usage_store is None else Meter(
            registry=self.registry, clock=self.clock, usage_store=usage_store,
            checkpoint_store=checkpoint_store, flush_s=usage_flush_s,
            cpu=backend if isinstance(backend, CpuMetered) else None,
            cpu_each_tick=self.prices.cpu is CpuCharge.USED)
        self.usage = None if self.meter is None else UsageReports(
            meter=self.meter, prices=self.prices, history=self.history, clock=self.clock)
        self.caps: CostCaps | None = None
        if self.meter is not None and usage_store is not None:
            self.caps = CostCaps(
                usage_store=usage_store, sandbox_store=sandbox_store, meter=self.meter,
                prices=self.prices, registry=self.registry, lifecycle=self.lifecycle,
                clock=self.clock, switch=self.kill_switch, check_s=cap_check_s)
            self.lifecycle.pausing.cap_gate = self.caps.release
        # One replica among several on one database (docs/scale-out.md); None: the only
        # process, which does everything.
        if coordination is not None:
            self.registry.steps = StepLeases(coordination)
        self.replicas = None if coordination is None else Replicas(
            coordination=coordination, sandbox_store=sandbox_store, registry=self.registry,
            backend=backend, lifecycle=self.lifecycle, sweep_s=sweep_s)
        if self.replicas is not None and self.registry.steps is not None:
            self.registry.steps.on_taken = self.replicas.refreshed
        # The team's secrets (docs/volumes-secrets-artefacts.md; None: no secrets API).
        self.secrets = None if secret_store is None else Secrets(secret_store)
        # Artefacts promoted out of sandboxes (docs/volumes-secrets-artefacts.md).
        self.artefacts: Artefacts | None = None
        if artefact_store is not None and artefacts_dir is not None:
            self.artefacts = Artefacts(
                artefact_store=artefact_store, sandbox_store=sandbox_store,
                registry=self.registry, blobs=Blobs(artefacts_dir),
                settings=artefact_settings, on_logged=self.traces.changes.notify,
                dialer=dialer_of(backend))
        # Volumes (E2B's; docs/volumes-secrets-artefacts.md): None without a store for them.
        self.volumes: Volumes | None = None
        if volume_store is not None:
            self.volumes = Volumes(volume_store=volume_store, backend=backend,
                                   registry=self.registry, lifecycle=self.lifecycle,
                                   settings=volume_settings)

    async def start(self) -> ReconcileReport:
        """End what a previous process left half-done (builds, pins), re-attach what
        survived a restart, clean what did not, start sampling and delivering webhooks.
        One replica among several (``coordination`` given): take every live sandbox as
        recorded, follow the others' changes, and do the rest once leading."""
        if self.span_export is not None:
            self.span_export.start()  # before reconcile: its events are exported too
        if self.replicas is not None:
            replicas = self.replicas
            self.health.records = lambda: replicas.leading
            report = await reconcile(
                backend=self.backend, sandbox_store=self.sandbox_store,
                registry=self.registry, lifecycle=self.lifecycle, judge=False)
            self._follow_backend()
            if self.caps is not None:
                self.caps.acting = False
                await self.caps.load()
                self._caps_task = asyncio.create_task(self._follow_caps(self.replicas))
            # Mission Control's live figures on this replica until it leads (then the
            # leader's sampling, which also stores them, replaces this one).
            self._sampler_task = asyncio.create_task(self.sampler.run(record=False))
            self.replicas.start(self._leadership)
            return report
        await self.templates.start()
        report = await reconcile(
            backend=self.backend, sandbox_store=self.sandbox_store, registry=self.registry,
            lifecycle=self.lifecycle,
        )
        self._follow_backend()
        await self._start_singletons()
        return report

    def _follow_backend(self) -> None:
        """What every replica does: take the trace's reports, hear of lost nodes."""
        self.traces.start()
        if isinstance(self.backend, Traced):
            self.backend.trace_to(self.traces.intake.receive)
        if isinstance(self.backend, NodesWatched):
            self.backend.watch(self.health.nodes_changed)
            for sbx in self.registry.all():  # those on nodes lost before this start
                if sbx.route is None and sbx.state is SandboxState.RUNNING:
                    self._lost_at_start.append(sbx.sandbox_id)

    async def _start_singletons(self) -> None:
        """What runs once however many replicas: sampling, metering, caps, health,
        webhooks, checkpoints' upkeep and schedules."""
        if self._lost_at_start:
            await self.health.nodes_changed(self._lost_at_start, False)
        if self._sampler_task is not None:
            self._sampler_task.cancel()
        self._sampler_task = asyncio.create_task(self.sampler.run())
        if self.meter is not None:
            await self.meter.start()
        if self.caps is not None:
            await self.caps.start()
        if self.health.settings.interval_s > 0:
            self._health_task = asyncio.create_task(self.health.run())
        if self.events is not None:
            self.events.start()
        await self.checkpoints.sweep()
        if self.artefacts is not None:
            await self.artefacts.start()
        if self.volumes is not None:
            await self.volumes.start()
        for sbx in self.registry.all():
            self.checkpoints.start_schedule(sbx, Team(sbx.team_id, sbx.team_id))

    async def _follow_caps(self, replicas: Replicas) -> None:
        """Caps made or changed through another replica, every 2 s: the leader takes them
        into its enforcement, a follower shows them with their spending as written."""
        assert self.caps is not None
        while True:
            await asyncio.sleep(2.0)
            try:
                await self.caps.refresh(respend=not replicas.leading)
            except Exception as exc:
                log.warning("following the cost caps failed: %s", exc)

    async def route_for_traffic(self, sandbox_id: str) -> Route | None:
        """What the gateway asks when it has no route to a sandbox: one asked of the
        backend when another replica made or resumed it, else the auto-resume's."""
        if self.replicas is not None:
            route = await self.replicas.route_now(sandbox_id)
            if route is not None:
                return route
        return await self.lifecycle.pausing.wake_for_traffic(sandbox_id)

    async def route_after_refusal(self, sandbox_id: str) -> Route | None:
        """What the gateway asks when the sandbox's machine refused it as not running
        there (several replicas): its state read again, then its route as for traffic
        (resumed first if it is paused with auto-resume); None when it has none."""
        if self.replicas is None:
            return None
        await self.replicas.recheck(sandbox_id)
        return await self.route_for_traffic(sandbox_id)

    async def _leadership(self, leading: bool) -> None:
        if not leading:
            # Another replica may lead already: acting on would act twice. Stop; the
            # supervisor (Kubernetes, systemd) starts this replica again, following.
            log.critical("this replica lost the leadership's lock: stopping")
            os.kill(os.getpid(), signal.SIGTERM)
            return
        log.info("this replica leads: timers, health checks, metering and webhooks run here")
        await self.templates.start(replicated=True)
        for sbx in self.registry.all():
            self.lifecycle.arm(sbx)
        await self._start_singletons()

    async def delete_template(self, team: Team, ref: str) -> None:
        """``DELETE /templates/{id}``: the team's template named ``ref``, else its snapshot
        of that id or name (E2B deletes both there); ``NotFound`` when it has neither."""
        try:
            if await self.templates.delete(team, ref) is not None:
                return
        except InvalidRequest:
            pass  # not a template name at all: maybe a snapshot's
        if not await self.snapshots.delete(team, ref):
            raise NotFound(f"template or snapshot {ref!r} not found")

    async def stop(self) -> None:
        """Stop webhook deliveries, builds, timers and sampling. Sandboxes keep running for
        the next start; a kill switch's pauses are written to disk first."""
        if self.replicas is not None:
            await self.replicas.close()
        if self._caps_task is not None:
            self._caps_task.cancel()
            await asyncio.gather(self._caps_task, return_exceptions=True)
        self.feed.close()  # live readers end their streams: the server can stop
        await self.kill_switch.close()
        if self.events is not None:
            await self.events.stop()
        await self.templates.close()
        self.lifecycle.close()
        self.checkpoints.close()
        if self.artefacts is not None:
            await self.artefacts.close()
        if self.volumes is not None:
            await self.volumes.close()
        if isinstance(self.backend, Traced):
            self.backend.trace_to(None)
        await self.traces.stop()
        if self._health_task is not None:
            self._health_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._health_task
        if self.caps is not None:
            await self.caps.stop()
        if self.meter is not None:
            await self.meter.stop()
        if self._sampler_task is not None:
            self._sampler_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler_task
        if self.span_export is not None:
            await self.span_export.close()  # last: every event above is in the log
