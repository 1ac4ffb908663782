"""``NamespaceBackend``: sandboxes as OCI containers in Linux namespaces on this host.

Sandboxes are independent of the server process: they keep running when it exits, and a
new backend on the same data directory re-attaches them (``list()``). See
docs/security.md for what this isolation does and does not protect against.

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
import os
import resource
from collections.abc import Awaitable
from pathlib import Path

from bac_server.backends.base import (
    BuildStep,
    CheckpointFailed,
    OutputCallback,
    ResourceUsage,
    SandboxEndpoint,
    SandboxNotFound,
    SandboxSetupError,
    SandboxSpec,
    SandboxStatus,
    TemplateImage,
)
from bac_server.backends.egress import EgressPolicy, NetworkUsage

from ._addresses import AddressPool
from ._build_step import run_build_step
from ._cgroupfs import CgroupTree
from ._checkpoint import freeze, thaw
from ._checkpointing import DISK, FILESYSTEM, FREEZER, CheckpointMixin, prepare_checkpoints
from ._config import NamespaceConfig
from ._context import Context
from ._criu import Criu
from ._egress import Egress
from ._envd_bundle import Progress
from ._launch import assign, start_slot
from ._layers import prepare_data_dirs
from ._layers_in_use import layers_in_use
from ._network import restore_egress
from ._ocispec import NOFILE_LIMIT, Limits
from ._pool import CLOSE_BOUND_S, WarmPool
from ._process import become_subreaper, is_alive, owner_token
from ._recovery import PENDING_CLAIM, recover
from ._runtime import OciRuntime, RuntimeFailed
from ._slot import SlotPhase, SlotRecord, save_record
from ._teardown import teardown, to_the_end
from ._usage import UsageSampler
from ._validate import validate

_log = logging.getLogger(__name__)


class NamespaceBackend(CheckpointMixin):
    name = "namespaces"

    def __init__(self, config: NamespaceConfig | None = None) -> None:
        self.config = config or NamespaceConfig()
        self._ctx: Context | None = None
        self._pool: WarmPool | None = None
        self._sandboxes: dict[str, SlotRecord] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._start_lock = asyncio.Lock()
        self._usage = UsageSampler()
        self._criu: Criu | None = None
        self._teardowns: set[asyncio.Future[None]] = set()

    # -- start-up ---------------------------------------------------------------------

    async def _context(self) -> Context:
        if self._ctx is not None:
            return self._ctx
        async with self._start_lock:
            if self._ctx is None:
                self._ctx = await self._start()
        return self._ctx

    async def _start(self) -> Context:
        cfg = self.config
        become_subreaper()
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard < NOFILE_LIMIT:
            # Sandboxes inherit their ceiling from the runtime, which inherits ours; raising
            # it needs CAP_SYS_RESOURCE, without which sandboxes get our hard limit.
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, NOFILE_LIMIT))
        prepare_data_dirs(cfg)
        for directory in (cfg.leases_dir, cfg.claims_dir):
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            runtime = OciRuntime(cfg.runtime, cfg.runtime_root)
            await runtime.check()
        except RuntimeFailed as exc:
            raise SandboxSetupError(str(exc)) from exc
        addresses = AddressPool(cfg.address_pool, cfg.leases_dir, cfg.veth_prefix)
        egress = Egress(addresses, cfg.egress_exempt, cfg.dns_upstreams)
        await egress.start()
        ctx = Context(config=cfg, runtime=runtime, addresses=addresses,
                      cgroups=CgroupTree(), owner=owner_token(), egress=egress)
        self._sandboxes = await recover(ctx)
        await restore_egress(ctx, self._sandboxes.values())
        self._criu = await prepare_checkpoints(ctx)
        self._pool = WarmPool(ctx, cfg.pool_size, self._default_limits(ctx),
                              preload=cfg.pool_preload)
        _log.info("namespace backend ready: %d sandbox(es) re-attached, runtime %s",
                  len(self._sandboxes), ctx.runtime.binary)
        return ctx

    def _default_limits(self, ctx: Context) -> Limits:
        spec_defaults = SandboxSpec.__dataclass_fields__
        return Limits(vcpus=spec_defaults["vcpus"].default,  # type: ignore[arg-type]
                      memory_mb=spec_defaults["memory_mb"].default,  # type: ignore[arg-type]
                      pids_max=spec_defaults["pids_max"].default,  # type: ignore[arg-type]
                      limit_swap=ctx.cgroups.supports_swap, background=True)

    async def prepare(self, template: TemplateImage, progress: Progress | None = None) -> None:
        """Build envd's bundle for ``template`` and start filling its warm pool."""
        ctx = await self._context()
        await ctx.envd_bundle(template, progress)
        assert self._pool is not None
        self._pool.want(template)

    async def wait_pool_full(self, template: TemplateImage) -> None:
        """Wait until the warm pool of ``template`` has been refilled."""
        await self._context()
        assert self._pool is not None
        await self._pool.wait_full(template)

    async def set_pool_size(self, size: int) -> None:
        """Change how many slots per hot template are kept started. Slots above a lowered
        target stay until handed out; raising it starts refilling at once."""
        if size < 0:
            raise ValueError("pool size must be >= 0")
        await self._context()
        assert self._pool is not None
        self._pool.resize(size)

    # -- Backend -----------------------------------------------------------------------

    def _claim(self, ctx: Context, sandbox_id: str) -> None:
        try:
            fd = os.open(ctx.claim_path(sandbox_id),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError as exc:
            raise SandboxSetupError(f"sandbox {sandbox_id} already exists") from exc
        with os.fdopen(fd, "w") as handle:
            handle.write(PENDING_CLAIM + ctx.owner)

    async def create(self, spec: SandboxSpec) -> SandboxEndpoint:
        ctx = await self._context()
        assert self._pool is not None
        limits = validate(self.config, spec, ctx.cgroups.supports_swap)
        self._claim(ctx, spec.sandbox_id)
        try:
            record = self._pool.take(spec.template)
            if record is not None:
                try:
                    await assign(ctx, record, spec, limits)
                except SandboxSetupError:
                    _log.warning("pooled slot %s failed at hand-out; starting cold",
                                 record.slot, exc_info=True)
                    record = None
            if record is None:
                record = await start_slot(ctx, spec.template, hostname=spec.sandbox_id,
                                          limits=limits, pooled=False, preload=False)
                await assign(ctx, record, spec, limits)
        except BaseException:
            ctx.claim_path(spec.sandbox_id).unlink(missing_ok=True)
            raise
        finally:
            self._pool.want(spec.template)  # refill (if pooling) after the hand-out
        self._sandboxes[spec.sandbox_id] = record
        return SandboxEndpoint(spec.sandbox_id, record.sandbox_address)

    def _lock(self, sandbox_id: str) -> asyncio.Lock:
        return self._locks.setdefault(sandbox_id, asyncio.Lock())

    def _record(self, sandbox_id: str) -> SlotRecord:
        record = self._sandboxes.get(sandbox_id)
        if record is None:
            raise SandboxNotFound(f"sandbox {sandbox_id} not found")
        return record

    async def destroy(self, sandbox_id: str) -> None:
        ctx = await self._context()
        async with self._lock(sandbox_id):
            record = self._sandboxes.get(sandbox_id)
            if record is None:
                slot = ctx.claimed_slot(sandbox_id)
                record = ctx.load(slot) if slot and not slot.startswith(PENDING_CLAIM) else None
            if record is None:
                return
            if record.phase is not SlotPhase.DESTROYING:
                record.move(SlotPhase.DESTROYING)
                save_record(ctx.paths(record.slot), record)
            # To the end even if the caller is cancelled (an expiry at shutdown); close()
            # waits for it, so a stop never leaves a sandbox half torn down.
            task = asyncio.ensure_future(teardown(ctx, record))
            self._teardowns.add(task)
            task.add_done_callback(self._teardowns.discard)
            try:
                await to_the_end(task)
            finally:
                if task.done() and not task.cancelled() and task.exception() is None:
                    self._sandboxes.pop(sandbox_id, None)
                    self._usage.forget(sandbox_id)
        self._locks.pop(sandbox_id, None)

    async def status(self, sandbox_id: str) -> SandboxStatus:
        ctx = await self._context()
        record = self._record(sandbox_id)
        if record.phase is SlotPhase.PAUSED and record.paused_to in (DISK, FILESYSTEM):
            return SandboxStatus.PAUSED  # its processes are on disk or gone by design
        if not is_alive(record.init_pid, record.init_start):
            return SandboxStatus.STOPPED
        if record.phase is SlotPhase.PAUSED or ctx.cgroups.is_frozen(record.cgroup_path):
            return SandboxStatus.PAUSED
        return SandboxStatus.RUNNING

    async def endpoint(self, sandbox_id: str) -> SandboxEndpoint:
        await self._context()
        return SandboxEndpoint(sandbox_id, self._record(sandbox_id).sandbox_address)

    async def list(self) -> list[str]:
        await self._context()
        return sorted(self._sandboxes)

    async def usage(self, sandbox_id: str) -> ResourceUsage:
        ctx = await self._context()
        return await self._usage.sample(ctx, sandbox_id, self._record(sandbox_id))

    # -- Pausable ------------------------------------------------------------------------

    async def pause(self, sandbox_id: str) -> None:
        ctx = await self._context()
        async with self._lock(sandbox_id):
            record = self._record(sandbox_id)
            if record.phase is SlotPhase.PAUSED:
                return
            # The cgroup freezer itself: a sandbox restored by CRIU is unknown to the runtime.
            await asyncio.to_thread(freeze, ctx, record)
            record.move(SlotPhase.PAUSED)
            record.paused_to = FREEZER
            save_record(ctx.paths(record.slot), record)

    async def resume(self, sandbox_id: str) -> SandboxEndpoint:
        ctx = await self._context()
        async with self._lock(sandbox_id):
            record = self._record(sandbox_id)
            if record.phase is SlotPhase.PAUSED and record.paused_to in (DISK, FILESYSTEM):
                raise CheckpointFailed(f"sandbox {sandbox_id} is suspended: wake() it")
            if record.phase is SlotPhase.PAUSED:
                thaw(ctx, record)
                record.move(SlotPhase.RUNNING)
                record.paused_to = None
                save_record(ctx.paths(record.slot), record)
        return SandboxEndpoint(sandbox_id, record.sandbox_address)

    # -- Builder ------------------------------------------------------------------------

    async def run_build_step(self, step: BuildStep, output: OutputCallback) -> int:
        """One template build command in a sandbox of its own (see ``_build_step``)."""
        ctx = await self._context()
        return await run_build_step(ctx, step, output)

    # -- LayerHolder ------------------------------------------------------------------

    async def layers_in_use(self) -> frozenset[Path]:
        """Layers this data dir's slots and checkpoints mount (read from disk)."""
        return await asyncio.to_thread(layers_in_use, self.config)

    # -- NetworkControl ----------------------------------------------------------------

    async def set_network(self, sandbox_id: str, policy: EgressPolicy) -> None:
        ctx = await self._context()
        async with self._lock(sandbox_id):
            await ctx.egress.update(self._record(sandbox_id).veth, policy)

    async def network_usage(self, sandbox_id: str) -> NetworkUsage:
        ctx = await self._context()
        return await ctx.egress.usage(self._record(sandbox_id).veth)

    async def close(self) -> None:
        """Stop the warm pool (its slots are destroyed) and let destroys in flight finish
        (bounded); sandboxes keep running."""
        if self._ctx is None:
            return
        closing: list[Awaitable[object]] = []
        if self._pool is not None:
            closing.append(self._pool.close())
        if self._teardowns:
            closing.append(asyncio.wait(set(self._teardowns), timeout=CLOSE_BOUND_S))
        await asyncio.gather(*closing)
        self._ctx.egress.close()
        self._ctx = None
