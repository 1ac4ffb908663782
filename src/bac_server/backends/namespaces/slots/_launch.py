"""Start a slot (cold path), bind a started slot to a sandbox (hand-out), and start envd
again in a slot whose processes are gone.

``start_slot`` builds every layer in order and records its progress on disk before each
step, so a failure at any point is undone by the one idempotent ``teardown``: a
half-isolated slot is never returned. ``assign`` turns a started slot into the requested
sandbox: hostname, limits, its egress policy, then envd's ``/init`` with the token and
environment; ``boot`` is the two for one sandbox. ``ensure_in_place`` puts back what a
host reboot took from a stopped slot (its overlay mount, its pinned network namespace, an
address), and ``cold_start`` starts envd afresh in it on its current files (a files-only
wake or roll-back).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from bac_server.backends.base import SandboxSetupError, SandboxSpec, TemplateImage
from bac_server.backends.egress import EgressPolicy
from bac_server.backends.envd_http import init_payload, post_init, probe_health
from bac_server.cancel_safe import off_loop, to_the_end
from bac_server.host import PARENT_CGROUP, is_mount_point, lxcfs_files, write_private
from bac_server.host._syscalls import CLONE_NEWUTS, sethostname, setns

from ..envd import EnvdBundleError, wait_ready
from ..network import LeaseOwner, create_netns
from ._context import Context
from ._disk import has_disk, mount_disk
from ._files import (
    SlotDisk,
    log_tail,
    make_slot_dirs,
    mount_rootfs,
    write_identity,
    write_resolv_conf,
)
from ._ocispec import Limits, SandboxPlan, build_config
from ._process import start_time
from ._record import DEFAULT_DISK_MB, SlotPaths, SlotPhase, SlotRecord, save_record
from ._restorable import adapt_config, netns_pinned, pin_netns, restorable
from ._runtime import OciRuntime
from ._seccomp import attach_compiled, remember_compiled
from ._teardown import undo_after_failure

_log = logging.getLogger(__name__)


def lay_out(ctx: Context, record: SlotRecord, layers: Sequence[Path], hostname: str, *,
            seeded: Path | None = None) -> None:
    """The new slot's files, its root (``layers``, topmost first) mounted (blocking).
    ``seeded``: an image of the slot's disk size holding the files it starts with
    (``SeedImage``)."""
    paths = ctx.paths(record.slot)
    ids = ctx.config.id_range
    make_slot_dirs(paths, ids, SlotDisk(ctx.config.data_dir, record.disk_mb, seeded),
                   ctx.config.ca_certificates)
    save_record(paths, record)
    write_identity(paths, hostname, ids)
    write_resolv_conf(paths, record.host_address, ids)
    mount_rootfs(paths, layers)


def _write_config(paths: SlotPaths, plan: SandboxPlan, preload: bool,
                  runtime: OciRuntime) -> dict[str, Any]:
    config = build_config(plan)
    if preload:
        config["process"]["args"].append("--preload")
    if runtime.name == "crun":
        attach_compiled(config, runtime.binary)
    if restorable(runtime):
        adapt_config(config)
    write_private(paths.config, json.dumps(config))
    return config


def proc_files_of(ctx: Context) -> tuple[tuple[str, Path], ...]:
    """LXCFS's /proc and /sys files to bind, when it serves now (cosmetic: none
    without it)."""
    directory = ctx.config.lxcfs_dir
    return () if directory is None else tuple(lxcfs_files(directory).items())


def _note_init(paths: SlotPaths, record: SlotRecord) -> None:
    record.init_pid = int(paths.pid_file.read_text().strip())
    record.init_start = start_time(record.init_pid)
    save_record(paths, record)


def new_record(ctx: Context, *, kind: str, template_id: str, layers: Sequence[Path],
               envd_bundle: str, limits: Limits, disk_mb: int = DEFAULT_DISK_MB
               ) -> SlotRecord:
    """A new slot's record (CREATING) with an address leased for it. ``kind`` starts its
    name: "s" for a sandbox's slot, "b" for a build step's; ``layers``: topmost first, the
    template's rootfs last; ``disk_mb``: the size of its disk (sandbox slots)."""
    slot = kind + secrets.token_hex(8)
    owner = LeaseOwner(str(ctx.paths(slot).root), ctx.owner)
    # A namespace made ahead, held for the slot's lay-out (``lay_out_with_netns``).
    stocked = ctx.netns_stock.take(owner) if ctx.netns_stock is not None else None
    lease = stocked if stocked is not None else ctx.addresses.lease(owner)
    return SlotRecord(
        slot=slot, phase=SlotPhase.CREATING, template_id=template_id,
        template_rootfs=str(layers[-1]), layers=[str(p) for p in layers],
        envd_bundle=envd_bundle, lease_index=lease.index, host_address=lease.host_address,
        sandbox_address=lease.sandbox_address, veth=lease.veth,
        cgroup_path=f"/{PARENT_CGROUP}/{slot}", owner=ctx.owner, vcpus=limits.vcpus,
        memory_mb=limits.memory_mb, pids_max=limits.pids_max, disk_mb=disk_mb)


async def _held(fd: int) -> int:
    return fd


async def lay_out_with_netns(ctx: Context, record: SlotRecord,
                             lay_out_files: Callable[[], None]) -> int:
    """Lay the new slot's files out (``lay_out_files``, blocking: in a thread) and make its
    network namespace, both at once (they are independent); returns an fd holding the
    namespace, which the caller closes (made ahead with the slot's address when the
    stock had one). On failure no fd is left open; what was made is the teardown's to
    remove."""
    stocked = ctx.netns_stock.claim(record.lease_index) if ctx.netns_stock else None
    laid, made = await asyncio.gather(
        off_loop(lay_out_files),
        _held(stocked) if stocked is not None
        else create_netns(ctx.addresses.describe(record.lease_index)),
        return_exceptions=True)
    if isinstance(made, BaseException) or isinstance(laid, BaseException):
        if isinstance(made, int):
            os.close(made)
        raise made if isinstance(made, BaseException) else laid  # type: ignore[misc]
    return made


async def start_slot(ctx: Context, template: TemplateImage, *, hostname: str, limits: Limits,
                     disk_mb: int, pooled: bool, preload: bool) -> SlotRecord:
    """Create and start a slot with envd listening and a disk of ``disk_mb``; raises
    SandboxSetupError (fail closed).

    The slot ends up POOLED, or still CREATING for ``assign`` to finish."""
    ctx.check_template(template)
    try:
        bundle = await ctx.envd_bundle(template)
    except EnvdBundleError as exc:
        raise SandboxSetupError(str(exc)) from exc
    record = new_record(ctx, kind="s", template_id=template.template_id,
                        layers=template.layer_stack, envd_bundle=str(bundle), limits=limits,
                        disk_mb=disk_mb)
    slot, paths = record.slot, ctx.paths(record.slot)
    started = time.perf_counter()
    try:
        netns_fd = await lay_out_with_netns(
            ctx, record, lambda: lay_out(ctx, record, template.layer_stack, hostname))
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        try:
            plan = SandboxPlan(
                hostname=hostname, rootfs=paths.rootfs,
                netns_path=(pin_netns(paths, netns_fd) if restorable(ctx.runtime)
                            else f"/proc/{os.getpid()}/fd/{netns_fd}"),
                cgroup_path=record.cgroup_path, id_range=ctx.config.id_range, limits=limits,
                allow_setuid=template.allow_setuid, envd_bundle=bundle, etc_dir=paths.etc,
                recursive_sys=ctx.runtime.name != "crun", trace_dir=paths.trace,
                proc_files=proc_files_of(ctx), merge_memory=ctx.config.ksm)
            config = await off_loop(lambda: _write_config(paths, plan, preload, ctx.runtime))
            try:
                await to_the_end(ctx.runtime.run_detached(
                    paths.root, slot, ready_fd=write_fd, stdio=paths.envd_log,
                    log=paths.runtime_log, pid_file=paths.pid_file))
            finally:
                os.close(write_fd)
                os.close(netns_fd)  # the sandbox's processes hold the namespace now
            if ctx.runtime.name == "crun" and "annotations" not in config:
                remember_compiled(config, ctx.runtime.binary,
                                  ctx.config.runtime_root / slot / "seccomp.bpf")
            await off_loop(lambda: _note_init(paths, record))
            await wait_ready(read_fd, ctx.config.envd_start_timeout_s)
        finally:
            os.close(read_fd)
        if pooled:
            # Ready means listening; a pooled slot waits until envd also answers, so
            # hand-out never pays for envd's imports.
            await probe_health(record.sandbox_address, ctx.config.envd_init_timeout_s)
            record.move(SlotPhase.POOLED)
            await off_loop(lambda: save_record(paths, record))
    except BaseException as exc:
        await _undo_and_raise(ctx, record, paths, exc, "sandbox setup failed")
    _log.debug("slot %s started in %.1f ms", slot, (time.perf_counter() - started) * 1000)
    return record


async def _undo_and_raise(ctx: Context, record: SlotRecord, paths: SlotPaths,
                          exc: BaseException, prefix: str) -> NoReturn:
    """Fail closed: release everything the slot made, then raise. Cancellation and other
    non-Exception signals pass through unchanged; errors become ``SandboxSetupError``
    carrying the tail of envd's output."""
    detail = log_tail(paths.envd_log)
    await undo_after_failure(ctx, record)
    if not isinstance(exc, Exception):
        raise exc
    message = f"{prefix}: {exc}"
    if detail:
        message += f"\nenvd output:\n{detail}"
    raise SandboxSetupError(message) from exc


# Where tools that keep a CA bundle of their own find the one with the operator's CAs
# (``bac_envd._trust`` adds them to the system bundle; Node adds the extra file).
TRUST_ENV = {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
             "REQUESTS_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt",
             "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt",
             "NODE_EXTRA_CA_CERTS": "/run/bac/ca.pem"}


# The same for a sandbox created with network rules (its relay CA is in the system
# bundle; there is no operator file for Node).
RELAY_TRUST_ENV = TRUST_ENV | {"NODE_EXTRA_CA_CERTS": "/etc/ssl/certs/ca-certificates.crt"}


def sandbox_env(spec: SandboxSpec, *, trust: bool = False) -> dict[str, str]:
    """What every process of the sandbox starts with: the template's ENV, overridden by
    the create request's env vars; under both, ``OMP_NUM_THREADS`` (its vCPUs: what
    ``nproc`` prints and OpenMP and BLAS pools size themselves by, since the scheduler's
    affinity still names every host CPU) and, with ``trust`` (the operator named CA
    certificates), ``TRUST_ENV``."""
    return (TRUST_ENV if trust else {}) | {"OMP_NUM_THREADS": str(spec.vcpus)} | \
        dict(spec.template.env) | spec.env_vars


def set_hostname_in(pid: int, hostname: str) -> None:
    """Set the hostname inside the sandbox's UTS namespace from a worker thread.

    Only this thread enters the namespace and it returns at once; UTS namespaces hold
    nothing but names, so even a failed return could not widen anyone's access."""
    own = os.open("/proc/thread-self/ns/uts", os.O_RDONLY | os.O_CLOEXEC)
    target = os.open(f"/proc/{pid}/ns/uts", os.O_RDONLY | os.O_CLOEXEC)
    try:
        # SECURITY: enters only the UTS namespace of a sandbox this server started.
        setns(target, CLONE_NEWUTS)
        try:
            sethostname(hostname)
        finally:
            setns(own, CLONE_NEWUTS)
    finally:
        os.close(target)
        os.close(own)


def _retarget(ctx: Context, record: SlotRecord, spec: SandboxSpec, limits: Limits) -> None:
    """Turn a pooled slot into the requested sandbox (blocking file and namespace work)."""
    paths = ctx.paths(record.slot)
    ctx.claim_path(spec.sandbox_id).write_text(record.slot)
    write_identity(paths, spec.sandbox_id, ctx.config.id_range)
    ctx.cgroups.apply(record.cgroup_path, limits)
    assert record.init_pid is not None
    set_hostname_in(record.init_pid, spec.sandbox_id)


async def attach_egress(ctx: Context, record: SlotRecord, policy: EgressPolicy) -> None:
    await ctx.egress.attach(ctx.paths(record.slot).root, record.veth, record.host_address,
                            record.sandbox_address, policy)


async def trust_relay_ahead(ctx: Context, record: SlotRecord,
                            current_token: str | None) -> None:
    """Put the slot's relay CA into its trust store now (a slot made ahead, already under
    an egress policy), so that its hand-out need not (``assign``'s ``relay_trusted``): the
    CA is made, sealed in the slot and sent to envd's ``/init`` alone, which adds it as
    root inside. Raises ``EnvdUnavailable`` or ``OSError``; the caller tears down."""
    pem = await off_loop(lambda: ctx.egress.relay_ca(record.veth, record.slot))
    await post_init(record.sandbox_address, {"bacTrust": pem},
                    ctx.config.envd_init_timeout_s, current_token)


async def assign(ctx: Context, record: SlotRecord, spec: SandboxSpec, limits: Limits, *,
                 current_token: str | None = None, egress_attached: bool = False,
                 relay_trusted: bool = False) -> None:
    """Bind a started slot to ``spec``; on failure the slot is torn down.
    ``current_token``: the token envd already has (a slot restored from a checkpoint);
    ``egress_attached``: the slot already runs under ``spec.network`` (restored ahead);
    ``relay_trusted``: its relay CA is in its trust store already (``trust_relay_ahead``).

    The slot's own files, limits and hostname are set while its egress policy and then
    envd's ``/init`` go in (independent; nobody can run code in it before the create
    returns its token). The record is saved once, as RUNNING, at the end: a crash before
    that leaves a slot that recovery tears down (pooled or creating, owner gone) and a
    claim it sweeps."""
    paths = ctx.paths(record.slot)
    pooled = record.phase is SlotPhase.POOLED

    async def network_then_init() -> None:
        if not egress_attached:
            # Before /init: no code of the user's runs without its egress policy.
            await attach_egress(ctx, record, spec.network)
        env = sandbox_env(spec, trust=bool(ctx.config.ca_certificates))
        if spec.network.rules and not ctx.config.ca_certificates:
            env = RELAY_TRUST_ENV | env  # the template's and the request's own win
        payload = init_payload(env, spec.envd_access_token,
                               spec.template.default_user, spec.template.default_workdir)
        # The sandbox's relay CA into its trust store (envd adds it, as root inside), so
        # the relay can terminate TLS for the hosts its rules name, now or after an update.
        if not relay_trusted:
            payload["bacTrust"] = await off_loop(
                lambda: ctx.egress.relay_ca(record.veth, spec.sandbox_id))
        await post_init(record.sandbox_address, payload, ctx.config.envd_init_timeout_s,
                        current_token)

    try:
        record.move(SlotPhase.ASSIGNING)
        record.sandbox_id = spec.sandbox_id
        if record.disk_mb != spec.disk_mb:
            # The disk's size is its file system's: a slot serves only creates of its size.
            raise SandboxSetupError(f"slot {record.slot} has a disk of {record.disk_mb} MiB, "
                                    f"not {spec.disk_mb}")
        own = off_loop(lambda: _retarget(ctx, record, spec, limits)) if pooled else \
            off_loop(lambda: ctx.claim_path(spec.sandbox_id).write_text(record.slot))
        # return_exceptions: the teardown below must not start while one still runs.
        for outcome in await asyncio.gather(own, network_then_init(), return_exceptions=True):
            if isinstance(outcome, BaseException):
                raise outcome
        if pooled:
            record.vcpus, record.memory_mb, record.pids_max = \
                limits.vcpus, limits.memory_mb, limits.pids_max
        record.move(SlotPhase.RUNNING)
        await off_loop(lambda: save_record(paths, record))
    except BaseException as exc:
        await _undo_and_raise(ctx, record, paths, exc, f"sandbox {spec.sandbox_id}")


async def boot(ctx: Context, spec: SandboxSpec, limits: Limits) -> SlotRecord:
    """A slot started for ``spec`` and handed to it (a cold start); fails closed."""
    record = await start_slot(ctx, spec.template, hostname=spec.sandbox_id, limits=limits,
                              disk_mb=spec.disk_mb, pooled=False, preload=False)
    await assign(ctx, record, spec, limits)
    return record


def limits_of(ctx: Context, record: SlotRecord) -> Limits:
    return Limits(vcpus=record.vcpus, memory_mb=record.memory_mb, pids_max=record.pids_max,
                  limit_swap=ctx.cgroups.supports_swap)


async def ensure_in_place(ctx: Context, record: SlotRecord) -> tuple[str, int | None]:
    """Mount and network of a slot whose processes are gone: the netns path, and an fd
    holding the namespace that the caller closes once the runtime has joined it."""
    paths = ctx.paths(record.slot)
    if has_disk(paths) and not is_mount_point(paths.layer):
        await off_loop(lambda: mount_disk(paths))  # a host reboot took the mounts
    if not is_mount_point(paths.rootfs):
        await off_loop(lambda: mount_rootfs(paths, record.layer_stack))
    if restorable(ctx.runtime) and netns_pinned(paths):
        return str(paths.root / "netns"), None
    owner = LeaseOwner(str(paths.root), record.owner)
    if ctx.addresses.owner(record.lease_index) != owner:
        # The lease directory did not survive (a reboot): take an address again.
        lease = ctx.addresses.lease(LeaseOwner(str(paths.root), ctx.owner))
        record.lease_index, record.veth = lease.index, lease.veth
        record.host_address, record.sandbox_address = lease.host_address, lease.sandbox_address
        record.owner = ctx.owner
        save_record(paths, record)
    lease = ctx.addresses.describe(record.lease_index)
    netns_fd = await create_netns(lease)
    if restorable(ctx.runtime):
        try:
            return pin_netns(paths, netns_fd), None
        finally:
            os.close(netns_fd)
    return f"/proc/{os.getpid()}/fd/{netns_fd}", netns_fd


async def cold_start(ctx: Context, record: SlotRecord, spec: SandboxSpec) -> None:
    """Start envd in the stopped slot on its current files and initialise it."""
    paths = ctx.paths(record.slot)
    netns, held = await ensure_in_place(ctx, record)
    plan = SandboxPlan(
        hostname=spec.sandbox_id, rootfs=paths.rootfs, netns_path=netns,
        cgroup_path=record.cgroup_path, id_range=ctx.config.id_range,
        limits=limits_of(ctx, record), allow_setuid=spec.template.allow_setuid,
        envd_bundle=Path(record.envd_bundle), etc_dir=paths.etc,
        recursive_sys=ctx.runtime.name != "crun",
        trace_dir=paths.trace if paths.trace.is_dir() else None, proc_files=proc_files_of(ctx),
        merge_memory=ctx.config.ksm)
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    try:
        try:
            await off_loop(lambda: _write_config(paths, plan, False, ctx.runtime))
            await ctx.runtime.run_detached(paths.root, record.slot, ready_fd=write_fd,
                                           stdio=paths.envd_log, log=paths.runtime_log,
                                           pid_file=paths.pid_file)
        finally:
            os.close(write_fd)
            if held is not None:
                os.close(held)  # the sandbox's processes hold the namespace now
        await off_loop(lambda: _note_init(paths, record))
        await wait_ready(read_fd, ctx.config.envd_start_timeout_s)
    finally:
        os.close(read_fd)
    payload = init_payload(sandbox_env(spec, trust=bool(ctx.config.ca_certificates)),
                           spec.envd_access_token,
                           spec.template.default_user, spec.template.default_workdir)
    await post_init(record.sandbox_address, payload, ctx.config.envd_init_timeout_s)
