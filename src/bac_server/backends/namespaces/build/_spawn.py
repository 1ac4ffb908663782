"""A build step's OCI config and its start: the sandbox config with the step's process.

The config is the sandbox's own (``slots._ocispec.build_config``, same namespaces, seccomp,
capabilities, masks and limits) with the process replaced and the binds added. The
runtime runs it detached with the step's pipes as stdout and stderr; its init is
re-parented to the server (the subreaper), which waits for it through a pidfd.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import PurePosixPath
from typing import Any

from bac_server.backends.base import BuildStep
from bac_server.cancel_safe import to_the_end
from bac_server.host import CgroupLayout, write_private

from ..slots import (
    Context,
    Limits,
    RuntimeFailed,
    SandboxPlan,
    SlotRecord,
    attach_compiled,
    empty_stdin,
    log_tail,
    remember_compiled,
    spawn,
    wait_exit,
)
from ..slots import build_config as sandbox_config
from ._user import StepUser

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def build_config(ctx: Context, record: SlotRecord, step: BuildStep, limits: Limits,
                 user: StepUser, netns_path: str, hostname: str) -> dict[str, Any]:
    """Write the slot's config.json for ``step`` (blocking) and return it."""
    paths = ctx.paths(record.slot)
    plan = SandboxPlan(
        hostname=hostname, rootfs=paths.rootfs, netns_path=netns_path,
        cgroup_path=record.cgroup_path, id_range=ctx.config.id_range, limits=limits,
        # RUN steps may use sudo (E2B's recipes do): a step of any template may setuid.
        allow_setuid=True, envd_bundle=None, etc_dir=paths.etc,
        recursive_sys=ctx.runtime.name != "crun")
    config = sandbox_config(plan)
    env = {"PATH": DEFAULT_PATH, "HOME": user.home, "HOSTNAME": hostname} | dict(step.env)
    process = config["process"]
    process["args"] = list(step.argv)
    process["env"] = [f"{key}={value}" for key, value in env.items()]
    process["cwd"] = str(PurePosixPath(step.cwd))
    process["user"] = {"uid": user.uid, "gid": user.gid}
    if user.groups:
        process["user"]["additionalGids"] = list(user.groups)
    config["mounts"] += [
        {"destination": dest, "type": "bind", "source": str(paths.binds / str(index)),
         "options": ["bind", "ro", "nosuid", "nodev"]}
        for index, (_source, dest) in enumerate(step.binds)]
    if ctx.runtime.name == "crun":
        attach_compiled(config, ctx.runtime.binary)
    write_private(paths.config, json.dumps(config))
    return config


async def spawn_detached(ctx: Context, record: SlotRecord, config: dict[str, Any], *,
                         stdout: int, stderr: int) -> None:
    """Start the step; returns once the runtime has exited (the command keeps running)."""
    paths = ctx.paths(record.slot)
    runtime = ctx.runtime
    runtime.state_root.mkdir(mode=0o700, parents=True, exist_ok=True)
    argv = [runtime.binary, "--root", str(runtime.state_root), "--log", str(paths.runtime_log),
            "run", "--detach", "--pid-file", str(paths.pid_file), "--bundle", str(paths.root),
            record.slot]
    empty = empty_stdin()
    try:
        # The runtime (and so the command) gets exactly stdin=an empty pipe and the step's
        # two pipes.
        pid = spawn(runtime.binary, argv, (empty, stdout, stderr))
    finally:
        os.close(empty)
    # The runtime is short-lived: let it finish so teardown sees all it made.
    code = await to_the_end(wait_exit(pid))
    if code != 0:
        raise RuntimeFailed(f"{runtime.name} run exited {code}: "
                            f"{log_tail(paths.runtime_log) or '(no log)'}")
    if runtime.name == "crun" and "annotations" not in config:
        remember_compiled(config, runtime.binary, runtime.state_root / record.slot / "seccomp.bpf")


def oom_kills(ctx: Context, record: SlotRecord) -> int:
    """How many processes of the slot the kernel killed for lack of memory."""
    v2 = ctx.cgroups.layout is CgroupLayout.V2
    name = "memory.events" if v2 else "memory.oom_control"
    with contextlib.suppress(OSError, ValueError):
        for line in ctx.cgroups.read(record.cgroup_path, "memory", name).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    return 0
