"""``run_build_step``: one command of a template build, in a short-lived sandbox slot.

The slot is isolated exactly like a sandbox's, by the same functions (user namespace in
the sandbox id range; pid, mount, ipc, uts, cgroup namespaces; the host-owned network
namespace, veth, egress policy and resolver; seccomp, capabilities, masked paths, cgroup
limits). What differs:

* its root is an overlay of ``step.lowers`` whose upper directory is ``step.upper`` (made
  here, owned by sandbox root, 0755); the overlay's work directory is a sibling of it,
  on the same filesystem, removed by teardown; redirects, metacopy and the index are
  off, so the upper directory is a self-contained layer (whiteouts and opaque
  directories only);
* it runs ``step.argv`` directly (no envd, no /opt/bac), with the step's environment,
  working directory (the runtime makes it when missing) and user;
* ``step.binds`` are bound on the host first, read-only, nosuid, nodev and without the
  mounts below them, under the slot's ``binds/``, and the runtime binds those;
* the runtime starts the command detached with two pipes as its stdout and stderr; the
  server, the init's subreaper, reads its exact exit status through a pidfd.

Life cycle: the record is saved (CREATING) before anything is made, BUILDING once the
command runs; teardown (the one used for sandboxes) removes everything but ``upper``, on
every path, cancellation included. After a crash, recovery at the next start tears the
slot down the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
from pathlib import Path, PurePosixPath

from bac_server.backends.base import (
    BuildStep,
    OutputCallback,
    SandboxSetupError,
)
from bac_server.cancel_safe import off_loop, to_the_end

from ..slots import (
    Context,
    Limits,
    SlotPhase,
    SlotRecord,
    attach_egress,
    check_resources,
    kill_processes,
    lay_out_with_netns,
    new_record,
    pidfd_exited,
    pids_for,
    save_record,
    start_time,
    undo_after_failure,
)
from ._files import lay_out, missing_paths, remove_stubs
from ._output import StepOutput
from ._spawn import build_config, oom_kills, spawn_detached
from ._user import UserLookupError, resolve_user

_log = logging.getLogger(__name__)
BUILD_PIDS = 8192
HOSTNAME = "build"
_DRAIN_TIMEOUT_S = 5.0
_ENV_KEY = re.compile(r"^[^=\0]+$")
# Paths of a sandbox that a bind may not cover.
_RESERVED = ("/proc", "/sys", "/dev", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf")


def _check(ctx: Context, step: BuildStep) -> Limits:
    """Bad input fails before anything is made (the message names the field)."""
    cfg = ctx.config
    check_resources(cfg, step.vcpus, step.memory_mb)
    if not step.argv or any("\0" in a for a in step.argv):
        raise SandboxSetupError("argv must be non-empty, without NUL bytes")
    bad_env = [k for k, v in step.env if not _ENV_KEY.match(k) or "\0" in v]
    if bad_env:
        raise SandboxSetupError(f"invalid environment variable names: {bad_env}")
    for field, path in [("cwd", step.cwd), *(("bind", dest) for _, dest in step.binds)]:
        if not path.startswith("/") or "\0" in path or ".." in PurePosixPath(path).parts:
            raise SandboxSetupError(f"{field} must be an absolute path without '..': {path!r}")
    for source, dest in step.binds:
        clean = str(PurePosixPath(dest))
        if clean == "/" or any(clean == r or clean.startswith(r + "/") for r in _RESERVED):
            raise SandboxSetupError(f"cannot bind over {dest}")
        if not source.is_absolute() or not source.exists():
            raise SandboxSetupError(f"bind source {source} does not exist")
    if not step.timeout_s > 0:
        raise SandboxSetupError(f"timeout_s must be > 0, got {step.timeout_s}")
    if not step.lowers:
        raise SandboxSetupError("a build step needs at least one lower layer (a rootfs)")
    if not step.upper.is_absolute() or not step.upper.parent.is_dir():
        raise SandboxSetupError(f"the parent of upper {step.upper} must be a directory")
    if step.upper.exists() or step.upper.is_symlink():
        raise SandboxSetupError(f"upper {step.upper} already exists")
    return Limits(step.vcpus, step.memory_mb,
                  pids_for(step.memory_mb, min(BUILD_PIDS, cfg.max_pids)),
                  ctx.cgroups.supports_swap)


def _new_record(ctx: Context, step: BuildStep, limits: Limits) -> SlotRecord:
    record = new_record(ctx, kind="b", template_id="build", layers=step.lowers,
                        envd_bundle="", limits=limits)
    record.upper_dir = str(step.upper)
    record.work_dir = str(step.upper.parent / f".{step.upper.name}.{record.slot}.work")
    return record


async def _start(ctx: Context, record: SlotRecord, step: BuildStep, limits: Limits,
                 out: StepOutput, pumps: list[asyncio.Task[None]]) -> int:
    """Make the slot and start the command; returns a pidfd of its init process."""
    paths = ctx.paths(record.slot)
    netns_fd = await lay_out_with_netns(ctx, record, lambda: lay_out(ctx, record, step,
                                                                     HOSTNAME))
    try:
        user = await off_loop(lambda: resolve_user(paths.rootfs, step.user,
                                                   ctx.config.id_range.size))
        # Before the command: no code of the build runs without its egress policy.
        await attach_egress(ctx, record, step.network)
        config = await off_loop(lambda: build_config(
            ctx, record, step, limits, user, f"/proc/{os.getpid()}/fd/{netns_fd}", HOSTNAME))
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        pumps += [asyncio.create_task(out.pump("stdout", out_r)),
                  asyncio.create_task(out.pump("stderr", err_r))]
        try:
            await spawn_detached(ctx, record, config, stdout=out_w, stderr=err_w)
        finally:
            os.close(out_w)
            os.close(err_w)
    finally:
        os.close(netns_fd)  # the command's processes hold the namespace now
    pid = int(paths.pid_file.read_text().strip())
    # The command may have exited already: its pid stays ours (a zombie) until reaped.
    pidfd = os.pidfd_open(pid)
    record.init_pid, record.init_start = pid, start_time(pid)
    record.move(SlotPhase.BUILDING)
    await off_loop(lambda: save_record(paths, record))
    return pidfd


async def _finish(ctx: Context, record: SlotRecord, pumps: list[asyncio.Task[None]],
                  stubs: list[str], upper: Path) -> None:
    """Kill what is left, let the output drain, release the slot, tidy ``upper``."""
    await asyncio.to_thread(kill_processes, ctx, record)
    if pumps:
        _, pending = await asyncio.wait(pumps, timeout=_DRAIN_TIMEOUT_S)
        for task in pending:
            task.cancel()
        for task in pumps:
            with contextlib.suppress(BaseException):
                await task
    await undo_after_failure(ctx, record)
    # Once the overlay is gone: its upper directory may not change under a live mount.
    await off_loop(lambda: remove_stubs(upper, stubs))


async def run_build_step(ctx: Context, step: BuildStep, output: OutputCallback) -> int:
    limits = _check(ctx, step)
    ctx.check_layers(step.lowers, "the build step")
    stubs = await off_loop(lambda: missing_paths(step))
    record = _new_record(ctx, step, limits)
    out = StepOutput(output)
    pumps: list[asyncio.Task[None]] = []
    try:
        pidfd = await _start(ctx, record, step, limits, out, pumps)
    except BaseException as exc:
        await undo_after_failure(ctx, record)
        # Every writer is gone now: what the runtime printed is read to its end.
        if pumps:
            await asyncio.wait(pumps, timeout=_DRAIN_TIMEOUT_S)
        for task in pumps:
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        if not isinstance(exc, Exception):
            raise
        if isinstance(exc, UserLookupError):
            raise SandboxSetupError(f"build step not run: {exc}") from exc
        message = f"build step setup failed: {exc}"
        held = out.held_text()
        if held and held not in message:
            message += f"\nruntime output:\n{held}"
        raise SandboxSetupError(message) from exc
    try:
        out.release()
        code, note = await _wait(ctx, record, pidfd, step.timeout_s)
    except BaseException:
        # Cancelled (or the output callback failed): nothing of the step may outlive it.
        with contextlib.suppress(BaseException):
            await to_the_end(_finish(ctx, record, pumps, stubs, step.upper))
        raise
    finally:
        os.close(pidfd)
    await to_the_end(_finish(ctx, record, pumps, stubs, step.upper))
    if note is not None:
        out.note(note)
    if out.error is not None:
        raise out.error
    return code


async def _wait(ctx: Context, record: SlotRecord, pidfd: int,
                timeout_s: float) -> tuple[int, str | None]:
    """The command's exit code (-signal when killed; killed at the timeout) and what the
    server has to say about it."""
    try:
        async with asyncio.timeout(timeout_s):
            await pidfd_exited(pidfd)
    except TimeoutError:
        await asyncio.to_thread(kill_processes, ctx, record)
        return -signal.SIGKILL, (f"bac: the step exceeded its time limit of {timeout_s:g} s "
                                 "and was killed")
    assert record.init_pid is not None
    try:
        # The pidfd is readable: the process has exited, so this returns at once.
        _, status = os.waitpid(record.init_pid, os.WNOHANG)  # noqa: ASYNC222
    except ChildProcessError as exc:
        raise SandboxSetupError("the build step's exit status was lost (the server is not "
                                "the subreaper of its sandboxes)") from exc
    record.init_pid = None  # reaped: the pid may be reused from now on
    code = os.waitstatus_to_exitcode(status)
    killed = oom_kills(ctx, record)
    if killed:
        return code, (f"bac: {killed} process(es) of the step ran out of memory (limit "
                      f"{record.memory_mb} MiB) and were killed")
    return code, None
