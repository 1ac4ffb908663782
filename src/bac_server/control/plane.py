"""The control plane as one object: its services, wired, plus start-up and shut-down."""

from __future__ import annotations

import asyncio
import contextlib

from bac_server.backends.base import Backend
from bac_server.control.checkpoints import Checkpoints, Snapshots
from bac_server.control.keys import KeyService, Team
from bac_server.control.limits import Limits
from bac_server.control.sandboxes import (
    Creator,
    History,
    Lifecycle,
    MetricsSampler,
    NetworkService,
    ReconcileReport,
    Registry,
    TemplateSource,
    reconcile,
)
from bac_server.control.templates import StartSnapshots
from bac_server.store import CheckpointStore, KeyStore, MetricStore, SandboxStore


class ControlPlane:
    def __init__(
        self,
        *,
        backend: Backend,
        templates: TemplateSource,
        key_store: KeyStore,
        sandbox_store: SandboxStore,
        metric_store: MetricStore,
        checkpoint_store: CheckpointStore,
        limits: Limits,
        metrics_interval_s: float = 5.0,
        metrics_retention_s: float = 86_400,
        start_snapshots: StartSnapshots | None = None,
    ) -> None:
        self.backend = backend
        self.sandbox_store = sandbox_store
        self.limits = limits
        self.registry = Registry()
        self.keys = KeyService(key_store)
        self.lifecycle = Lifecycle(
            backend=backend, sandbox_store=sandbox_store, registry=self.registry, limits=limits,
            templates=templates,
        )
        self.creator = Creator(
            backend=backend,
            templates=templates,
            sandbox_store=sandbox_store,
            checkpoint_store=checkpoint_store,
            registry=self.registry,
            lifecycle=self.lifecycle,
            limits=limits,
            start_snapshots=start_snapshots,
        )
        self.history = History(sandbox_store=sandbox_store, metric_store=metric_store,
                               registry=self.registry)
        self.checkpoints = Checkpoints(
            backend=backend, checkpoint_store=checkpoint_store, sandbox_store=sandbox_store,
            registry=self.registry, lifecycle=self.lifecycle, limits=limits,
            templates=templates,
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
        )
        self._sampler_task: asyncio.Task[None] | None = None

    async def start(self) -> ReconcileReport:
        """Re-attach what survived a restart, clean what did not, start sampling."""
        report = await reconcile(
            backend=self.backend, sandbox_store=self.sandbox_store, registry=self.registry,
            lifecycle=self.lifecycle,
        )
        self._sampler_task = asyncio.create_task(self.sampler.run())
        await self.checkpoints.sweep()
        for sbx in self.registry.all():
            self.checkpoints.start_schedule(sbx, Team(sbx.team_id, sbx.team_id))
        return report

    async def stop(self) -> None:
        """Stop timers and sampling. Sandboxes keep running for the next start."""
        self.lifecycle.close()
        self.checkpoints.close()
        if self._sampler_task is not None:
            self._sampler_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler_task
