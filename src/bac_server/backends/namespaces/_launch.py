"""Start a slot (cold path) and bind a started slot to a sandbox (hand-out).

``start_slot`` builds every layer in order and records its progress on disk before each
step, so a failure at any point is undone by the one idempotent ``teardown``: a
half-isolated slot is never returned. ``assign`` turns a started slot into the requested
sandbox: hostname, limits, then envd's ``/init`` with the token and environment.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import time

from bac_server.backends.base import SandboxSetupError, SandboxSpec, TemplateImage
from bac_server.host import PARENT_CGROUP
from bac_server.host._syscalls import CLONE_NEWUTS, sethostname, setns

from ._addresses import LeaseOwner
from ._context import Context
from ._envd_bundle import EnvdBundleError
from ._envd_client import init_payload, post_init, wait_ready
from ._layers import make_slot_dirs, mount_rootfs, write_identity
from ._netns import create_netns, in_fresh_thread
from ._ocispec import Limits, SandboxPlan, build_config
from ._process import start_time
from ._slot import SlotPhase, SlotRecord, save_record
from ._teardown import teardown

_log = logging.getLogger(__name__)


async def undo_after_failure(ctx: Context, record: SlotRecord) -> None:
    """Tear the slot down even if the caller is being cancelled."""
    task = asyncio.ensure_future(teardown(ctx, record))
    try:
        await asyncio.shield(task)
    except Exception:
        _log.exception("teardown of failed slot %s left resources; recovery will retry",
                       record.slot)


def _tail(path: os.PathLike[str], limit: int = 1500) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - limit))
            return handle.read().decode(errors="replace").strip()
    except OSError:
        return ""


async def start_slot(ctx: Context, template: TemplateImage, *, hostname: str, limits: Limits,
                     pooled: bool, preload: bool) -> SlotRecord:
    """Create and start a slot with envd listening; raises SandboxSetupError (fail closed).

    The slot ends up POOLED, or still CREATING for ``assign`` to finish."""
    ctx.check_template(template)
    try:
        bundle = await ctx.envd_bundle(template)
    except EnvdBundleError as exc:
        raise SandboxSetupError(str(exc)) from exc
    slot = "s" + secrets.token_hex(8)
    paths = ctx.paths(slot)
    lease = ctx.addresses.lease(LeaseOwner(str(paths.root), ctx.owner))
    record = SlotRecord(
        slot=slot, phase=SlotPhase.CREATING, template_id=template.template_id,
        template_rootfs=str(template.rootfs), envd_bundle=str(bundle), lease_index=lease.index,
        host_address=lease.host_address, sandbox_address=lease.sandbox_address,
        veth=lease.veth, cgroup_path=f"/{PARENT_CGROUP}/{slot}", owner=ctx.owner,
        vcpus=limits.vcpus, memory_mb=limits.memory_mb, pids_max=limits.pids_max)
    ids = ctx.config.id_range
    started = time.perf_counter()
    try:
        make_slot_dirs(paths, ids)
        save_record(paths, record)
        write_identity(paths, hostname, ids)
        mount_rootfs(paths, template.rootfs)
        netns_fd = await create_netns(lease)
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        try:
            plan = SandboxPlan(
                hostname=hostname, rootfs=paths.rootfs,
                netns_path=f"/proc/{os.getpid()}/fd/{netns_fd}",
                cgroup_path=record.cgroup_path, id_range=ids, limits=limits,
                allow_setuid=template.allow_setuid, envd_bundle=bundle, etc_dir=paths.etc)
            config = build_config(plan)
            if preload:
                config["process"]["args"].append("--preload")
            paths.config.write_text(json.dumps(config))
            try:
                await ctx.runtime.run_detached(
                    paths.root, slot, ready_fd=write_fd, stdio=paths.envd_log,
                    log=paths.runtime_log, pid_file=paths.pid_file)
            finally:
                os.close(write_fd)
                os.close(netns_fd)  # the sandbox's processes hold the namespace now
            record.init_pid = int(paths.pid_file.read_text().strip())
            record.init_start = start_time(record.init_pid)
            save_record(paths, record)
            await wait_ready(read_fd, ctx.config.envd_start_timeout_s)
        finally:
            os.close(read_fd)
        if pooled:
            record.move(SlotPhase.POOLED)
            save_record(paths, record)
    except BaseException as exc:
        detail = _tail(paths.envd_log)
        await undo_after_failure(ctx, record)
        if not isinstance(exc, Exception):
            raise
        message = f"sandbox setup failed: {exc}"
        if detail:
            message += f"\nenvd output:\n{detail}"
        raise SandboxSetupError(message) from exc
    _log.debug("slot %s started in %.1f ms", slot, (time.perf_counter() - started) * 1000)
    return record


def _set_hostname_in(pid: int, hostname: str) -> None:
    fd = os.open(f"/proc/{pid}/ns/uts", os.O_RDONLY | os.O_CLOEXEC)
    try:
        # SECURITY: only this throw-away thread enters the sandbox's UTS namespace.
        setns(fd, CLONE_NEWUTS)
    finally:
        os.close(fd)
    sethostname(hostname)


async def assign(ctx: Context, record: SlotRecord, spec: SandboxSpec, limits: Limits) -> None:
    """Bind a started slot to ``spec``; on failure the slot is torn down."""
    paths = ctx.paths(record.slot)
    try:
        record.move(SlotPhase.ASSIGNING)
        record.sandbox_id = spec.sandbox_id
        record.disk_mb = spec.disk_mb
        save_record(paths, record)
        assert record.init_pid is not None
        if (await asyncio.to_thread(paths.etc.joinpath("hostname").read_text)).strip() \
                != spec.sandbox_id:
            write_identity(paths, spec.sandbox_id, ctx.config.id_range)
            await in_fresh_thread(lambda: _set_hostname_in(record.init_pid or 0, spec.sandbox_id))
        if (record.vcpus, record.memory_mb, record.pids_max) != \
                (limits.vcpus, limits.memory_mb, limits.pids_max):
            await ctx.runtime.update(record.slot, limits.resources())
            record.vcpus, record.memory_mb, record.pids_max = \
                limits.vcpus, limits.memory_mb, limits.pids_max
        payload = init_payload(spec.env_vars, spec.envd_access_token,
                               spec.template.default_user, spec.template.default_workdir)
        await post_init(ctx.http, record.sandbox_address, payload, ctx.config.envd_init_timeout_s)
        record.move(SlotPhase.RUNNING)
        save_record(paths, record)
    except BaseException as exc:
        detail = _tail(paths.envd_log)
        await undo_after_failure(ctx, record)
        if not isinstance(exc, Exception):
            raise
        message = f"sandbox {spec.sandbox_id}: {exc}"
        if detail:
            message += f"\nenvd output:\n{detail}"
        raise SandboxSetupError(message) from exc
