"""``NamespaceBackend``: sandboxes as OCI containers in Linux namespaces on this host.

Sandboxes are independent of the server process: they keep running when it exits, and a
new backend on the same data directory re-attaches them (``list()``). See
docs/security.md for what this isolation does and does not protect against.

The backend starts on first use and is then made of collaborators it delegates to: the
``SlotTable`` (the live sandboxes, their locks, claims and destroy), the ``ReadyPool``
(a create: a slot booted or restored ahead handed out, else a restore of the template's
start snapshot, else a boot; and start snapshots taken), the ``Suspender``
(freezer pauses, suspend and wake), the ``Checkpointer`` (checkpoints, roll-backs,
copies) and the build steps; the protocols of ``backends.base`` are implemented here by
handing each call to the one that owns it.

Errors are those of ``backends.base``; internal failures (runtime, envd, netlink, files)
reach callers only as ``SandboxSetupError`` after everything made was torn down::

    ResourceLimitError    vcpus / memory_mb / pids_max beyond the maxima, address pool full
    SandboxSetupError     bad id or env, id in use, runtime/envd/network failure (fail closed);
                          for a build step also: bad step, unknown user, command not startable
    SandboxNotFound       status / endpoint / usage / pause / resume of an unknown id
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bac_server.backends.base import (
    BuildStep,
    CheckpointFailed,
    CheckpointInfo,
    OutputCallback,
    ResourceUsage,
    SandboxEndpoint,
    SandboxSetupError,
    SandboxSpec,
    SandboxStatus,
    TemplateImage,
    TraceSink,
    VolumeBind,
)
from bac_server.backends.egress import EgressPolicy, NetworkUsage
from bac_server.cancel_safe import off_loop
from bac_server.host import enable_ksm

from ._config import NamespaceConfig
from .build import run_build_step
from .checkpoint import (
    Checkpointer,
    Flusher,
    Handover,
    Suspender,
    bundles_in_use,
    prepare_checkpoints,
)
from .envd import Progress
from .network import AddressPool, Egress, NetnsStock
from .pool import CLOSE_BOUND_S, ReadyPool, take_start_snapshot
from .slots import (
    NOFILE_LIMIT,
    CgroupTree,
    Context,
    Limits,
    OciRuntime,
    RuntimeFailed,
    SlotStock,
    SlotTable,
    become_subreaper,
    layers_in_use,
    owner_token,
    pids_for,
    prepare_data_dirs,
    recover,
    restore_egress,
)
from .volumes import VolumeStorage, bind_volumes

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Parts:
    """The started backend: what its calls are handed to."""

    ctx: Context
    slots: SlotTable
    pool: ReadyPool
    suspender: Suspender
    checkpointer: Checkpointer


class NamespaceBackend:
    name = "namespaces"

    def __init__(self, config: NamespaceConfig | None = None) -> None:
        self.config = config or NamespaceConfig()
        # Work that close() waits for (bounded): destroys, flushes, a resume's deletions.
        self._tasks: set[asyncio.Future[None]] = set()
        self._flusher = Flusher(self._tasks)
        self._parts: _Parts | None = None
        self._start_lock = asyncio.Lock()
        self._trace_sink: TraceSink | None = None
        self._volumes = VolumeStorage(self.config.data_dir, self.config.id_range)

    # -- start-up ---------------------------------------------------------------------

    async def _started(self) -> _Parts:
        if self._parts is not None:
            return self._parts
        async with self._start_lock:
            if self._parts is None:
                self._parts = await self._start()
        return self._parts

    async def _start(self) -> _Parts:
        cfg = self.config
        become_subreaper()
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard < NOFILE_LIMIT:
            # Sandboxes inherit their ceiling from the runtime, which inherits ours; raising
            # it needs CAP_SYS_RESOURCE, without which sandboxes get our hard limit.
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, NOFILE_LIMIT))
        prepare_data_dirs(cfg)
        if cfg.ksm:
            enable_ksm(cfg.ksm_max_cpu_pct)
        for directory in (cfg.leases_dir, cfg.claims_dir):
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            runtime = OciRuntime(cfg.runtime, cfg.runtime_root)
            await runtime.check()
        except RuntimeFailed as exc:
            raise SandboxSetupError(str(exc)) from exc
        addresses = AddressPool(cfg.address_pool, cfg.leases_dir, cfg.veth_prefix)
        egress = Egress(addresses, cfg.egress_exempt, cfg.dns_upstreams, cfg.secret_lookup,
                        cfg.ca_certificates, cfg.relay_ca_sealer)
        await egress.start()
        ctx = Context(config=cfg, runtime=runtime, addresses=addresses,
                      cgroups=CgroupTree(), owner=owner_token(), egress=egress)
        records = await recover(ctx, bundles_in_use(cfg))
        await restore_egress(ctx, records.values())
        if cfg.netns_stock > 0:
            # Made once recovery and the egress sweep have removed what an earlier
            # process left (its stock's leases and egress objects among them).
            ctx.netns_stock = NetnsStock(
                addresses, size=cfg.netns_stock,
                stock_dir=str(cfg.sandboxes_dir / ".netns-stock"), owner=ctx.owner,
                prepare=lambda lease: egress.prepare(lease.veth, lease.host_address,
                                                     lease.sandbox_address),
                unprepare=lambda lease: egress.unprepare(lease.veth, lease.host_address,
                                                         lease.sandbox_address))
            ctx.netns_stock.start()
        criu = await prepare_checkpoints(ctx)
        if criu is not None and cfg.slot_stock > 0:
            ctx.slot_stock = SlotStock(ctx, size=cfg.slot_stock,
                                       limits=self._default_limits(ctx))
            ctx.slot_stock.start()
        slots = SlotTable(ctx, records, self._tasks)
        slots.traces.sink = self._trace_sink
        await slots.open_traces()
        handover = Handover(ctx, self._tasks)
        await off_loop(handover.sweep)
        suspender = Suspender(slots, criu, self._flusher, self._tasks, handover)
        await suspender.reattached(records.values())
        checkpointer = Checkpointer(slots, suspender, self._flusher)
        pool = ReadyPool(slots, checkpointer, size=cfg.pool_size,
                         restored_size=cfg.start_snapshot_pool_size,
                         limits=self._default_limits(ctx), preload=cfg.pool_preload,
                         disk_mb=cfg.default_disk_mb, max_size=cfg.pool_max,
                         demand_window_s=cfg.pool_demand_window_s)
        _log.info("namespace backend ready: %d sandbox(es) re-attached, runtime %s",
                  len(records), ctx.runtime.binary)
        return _Parts(ctx, slots, pool, suspender, checkpointer)

    def _default_limits(self, ctx: Context) -> Limits:
        spec_defaults = SandboxSpec.__dataclass_fields__
        memory_mb: int = spec_defaults["memory_mb"].default  # type: ignore[assignment]
        pids_max: int = spec_defaults["pids_max"].default  # type: ignore[assignment]
        return Limits(vcpus=spec_defaults["vcpus"].default,  # type: ignore[arg-type]
                      memory_mb=memory_mb, pids_max=pids_for(memory_mb, pids_max),
                      limit_swap=ctx.cgroups.supports_swap, background=True)

    async def prepare(self, template: TemplateImage, progress: Progress | None = None) -> None:
        """Build envd's bundle for ``template`` and start filling its warm pool."""
        parts = await self._started()
        await parts.ctx.envd_bundle(template, progress)
        parts.pool.want(template)

    # -- Backend -----------------------------------------------------------------------

    async def create(self, spec: SandboxSpec) -> SandboxEndpoint:
        return await (await self._started()).pool.create(spec)

    async def destroy(self, sandbox_id: str) -> None:
        parts = await self._started()
        gone = await parts.slots.destroy(sandbox_id)
        if gone is not None:
            parts.suspender.forget(gone)
            try:
                await parts.suspender.handover.withdraw(sandbox_id, gone, gone=True)
            except (CheckpointFailed, OSError) as exc:
                _log.warning("sandbox %s is gone, its export stays on the shared storage "
                             "(swept by no node): %s", sandbox_id, exc)

    async def status(self, sandbox_id: str) -> SandboxStatus:
        return (await self._started()).slots.status(sandbox_id)

    async def endpoint(self, sandbox_id: str) -> SandboxEndpoint:
        return (await self._started()).slots.endpoint(sandbox_id)

    async def list(self) -> list[str]:
        return (await self._started()).slots.ids()

    async def usage(self, sandbox_id: str) -> ResourceUsage:
        return await (await self._started()).slots.usage(sandbox_id)

    # -- CpuMetered ------------------------------------------------------------------------

    def cpu_seconds(self, sandbox_id: str) -> float | None:
        if self._parts is None:
            return None
        return self._parts.slots.cpu_seconds(sandbox_id)

    # -- Traced ---------------------------------------------------------------------------

    def trace_to(self, sink: TraceSink | None) -> None:
        self._trace_sink = sink
        if self._parts is not None:
            self._parts.slots.traces.sink = sink

    # -- Pausable ------------------------------------------------------------------------

    async def pause(self, sandbox_id: str) -> None:
        await (await self._started()).suspender.pause(sandbox_id)

    async def resume(self, sandbox_id: str) -> SandboxEndpoint:
        return await (await self._started()).suspender.resume(sandbox_id)

    # -- FleetPausable --------------------------------------------------------------------

    async def pause_all(self, sandbox_ids: Sequence[str]) -> dict[str, str]:
        return await (await self._started()).suspender.pause_all(sandbox_ids)

    # -- Checkpointable -------------------------------------------------------------------

    @property
    def memory_checkpoints(self) -> bool:
        return self._parts is not None and self._parts.suspender.memory_checkpoints

    async def suspend(self, sandbox_id: str, *, memory: bool) -> int:
        return await (await self._started()).suspender.suspend(sandbox_id, memory=memory)

    async def wake(self, spec: SandboxSpec, *, memory: bool = True) -> SandboxEndpoint:
        return await (await self._started()).suspender.wake(spec, memory=memory)

    async def take_over(self, spec: SandboxSpec, *, memory: bool = True) -> SandboxEndpoint:
        return await (await self._started()).checkpointer.take_over(spec, memory=memory)

    async def checkpoint(self, sandbox_id: str, checkpoint_id: str, *,
                         memory: bool) -> CheckpointInfo:
        return await (await self._started()).checkpointer.checkpoint(
            sandbox_id, checkpoint_id, memory=memory)

    async def restore(self, spec: SandboxSpec, checkpoint_id: str) -> SandboxEndpoint:
        return await (await self._started()).checkpointer.restore(spec, checkpoint_id)

    async def create_from(self, spec: SandboxSpec, checkpoint_id: str, *,
                          source_token: str | None) -> SandboxEndpoint:
        return await (await self._started()).checkpointer.create_from(
            spec, checkpoint_id, source_token=source_token)

    async def delete_checkpoint(self, checkpoint_id: str) -> None:
        await (await self._started()).checkpointer.delete(checkpoint_id)

    # -- VolumeHost ---------------------------------------------------------------------

    async def make_volume(self, volume_id: str, size_mb: int) -> None:
        await self._started()
        await off_loop(lambda: self._volumes.make(volume_id, size_mb))

    async def volume_dir(self, volume_id: str) -> Path:
        return await off_loop(lambda: self._volumes.ensure_mounted(volume_id))

    async def drop_volume(self, volume_id: str) -> None:
        await off_loop(lambda: self._volumes.drop(volume_id))

    async def mount_volumes(self, sandbox_id: str, binds: Sequence[VolumeBind]) -> None:
        parts = await self._started()
        pairs = [(str(await self.volume_dir(b.volume_id)), b.path) for b in binds]
        async with parts.slots.lock(sandbox_id):
            record = parts.slots.record(sandbox_id)
            await bind_volumes(parts.ctx, record, pairs)

    # -- StartSnapshotter ---------------------------------------------------------------

    @property
    def takes_start_snapshots(self) -> bool:
        return self.memory_checkpoints

    async def take_start_snapshot(self, image: TemplateImage, checkpoint_id: str, *,
                                  token: str, vcpus: int, memory_mb: int,
                                  ready_cmd: str | None,
                                  ready_bound_s: float) -> CheckpointInfo:
        parts = await self._started()
        return await take_start_snapshot(
            parts.slots, parts.checkpointer, image, checkpoint_id, token=token, vcpus=vcpus,
            memory_mb=memory_mb, ready_cmd=ready_cmd, ready_bound_s=ready_bound_s,
            disk_mb=self.config.default_disk_mb)

    async def delete_start_snapshot(self, checkpoint_id: str) -> None:
        parts = await self._started()
        await parts.pool.drain(checkpoint_id)
        if parts.ctx.slot_stock is not None:
            await parts.ctx.slot_stock.drain(checkpoint_id)
        await parts.checkpointer.delete(checkpoint_id)

    # -- Builder ------------------------------------------------------------------------

    async def run_build_step(self, step: BuildStep, output: OutputCallback) -> int:
        """One template build command in a sandbox of its own (see ``build._step``)."""
        return await run_build_step((await self._started()).ctx, step, output)

    # -- LayerHolder ------------------------------------------------------------------

    async def layers_in_use(self) -> frozenset[Path]:
        """Layers this data dir's slots and checkpoints mount (read from disk)."""
        return await asyncio.to_thread(layers_in_use, self.config)

    # -- NetworkControl ----------------------------------------------------------------

    async def set_network(self, sandbox_id: str, policy: EgressPolicy) -> None:
        parts = await self._started()
        async with parts.slots.lock(sandbox_id):
            await parts.ctx.egress.update(parts.slots.record(sandbox_id).veth, policy)

    async def network_usage(self, sandbox_id: str) -> NetworkUsage:
        parts = await self._started()
        return await parts.ctx.egress.usage(parts.slots.record(sandbox_id).veth)

    async def close(self) -> None:
        """Stop the ready pool (its slots are destroyed) and let destroys in flight finish
        (bounded); sandboxes keep running."""
        parts = self._parts
        if parts is None:
            return
        closing: list[Awaitable[object]] = [parts.pool.close()]
        if self._tasks:
            closing.append(asyncio.wait(set(self._tasks), timeout=CLOSE_BOUND_S))
        await asyncio.gather(*closing)
        if parts.ctx.slot_stock is not None:
            await parts.ctx.slot_stock.close()
        if parts.ctx.netns_stock is not None:
            await parts.ctx.netns_stock.close()
        await parts.ctx.egress.close()
        parts.slots.traces.close_all()
        self._parts = None
