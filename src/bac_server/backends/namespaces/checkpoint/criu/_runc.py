"""Checkpoint and restore through ``runc checkpoint|restore`` (the slower, older path).

Used where CRIU cannot be driven directly (``_dump``): on a unified-cgroup host,
where runc enforces device rules with a BPF program of its own, and to restore images
that runc saved before Bac drove CRIU itself (they carry ``stdio-keys.json`` and no
``bac-criu.json``). runc reads the slot's config, runs CRIU inside the pinned network
namespace (``nsenter``) with a per-operation configuration (``CRIU_CONFIG_FILE``, see
``_tool``) and manages the cgroups itself. Established connections are always closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path

from bac_server.backends.base import CheckpointFailed

from ...slots import Context, SlotRecord, log_tail, netns_pin, reap_if_child, start_time
from ._run import criu_errors
from ._tool import stdio_keys, write_runc_restore_config

KEYS_FILE = "stdio-keys.json"


async def _runc(ctx: Context, criu: str, record: SlotRecord, conf: Path, args: list[str], *,
                stdout: int | None = None) -> tuple[int, str]:
    paths = ctx.paths(record.slot)
    # SECURITY: nsenter moves only runc (and the CRIU it starts) into the sandbox's network
    # namespace, which the host owns; the server process itself never changes namespace.
    argv = ["nsenter", f"--net={netns_pin(paths)}", "--", ctx.runtime.binary,
            "--root", str(ctx.runtime.state_root), "--log", str(paths.runtime_log),
            "--criu", criu, *args]
    env = {**os.environ, "CRIU_CONFIG_FILE": str(conf)}
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=stdout if stdout is not None else asyncio.subprocess.DEVNULL,
        stderr=stdout if stdout is not None else asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    return proc.returncode or 0, (err or b"").decode(errors="replace")


async def runc_dump(ctx: Context, criu: str, record: SlotRecord, images: Path, work: Path, *,
                    leave_running: bool) -> None:
    assert record.init_pid is not None
    keys = stdio_keys(record.init_pid)
    (images / KEYS_FILE).write_text(json.dumps(keys))
    conf = work / "dump.conf"
    lines = [f"external {key}" for key in sorted(set(keys.values()))] + ["tcp-close"]
    conf.write_text("".join(line + "\n" for line in lines))
    args = ["checkpoint", "--image-path", str(images), "--work-path", str(work), "--file-locks"]
    if leave_running:
        args.append("--leave-running")
    code, err = await _runc(ctx, criu, record, conf, [*args, record.slot])
    if code != 0:
        raise CheckpointFailed(f"checkpoint of slot {record.slot} failed: {err.strip()}\n"
                               f"{criu_errors(work / 'dump.log')}")
    if not leave_running:
        reap_if_child(record.init_pid)


async def runc_restore(ctx: Context, criu: str, record: SlotRecord, images: Path,
                       work: Path, log: int) -> int:
    """Restore through runc with ``log`` as the tasks' stdout/stderr; returns the init's
    pid. On failure nothing of the attempt is left running."""
    paths = ctx.paths(record.slot)
    raw = json.loads((images / KEYS_FILE).read_text())
    conf = work / "restore.conf"
    write_runc_restore_config(conf, {int(fd): str(key) for fd, key in raw.items()})
    pid_file = work / "init.pid"
    pid_file.unlink(missing_ok=True)
    args = ["restore", "--detach", "--bundle", str(paths.root), "--image-path", str(images),
            "--work-path", str(work), "--file-locks", "--pid-file", str(pid_file)]
    code, _ = await _runc(ctx, criu, record, conf, [*args, record.slot], stdout=log)
    if code != 0:
        with contextlib.suppress(Exception):
            await ctx.runtime.delete(record.slot)
        raise CheckpointFailed(f"restore of slot {record.slot} failed: "
                               f"{log_tail(paths.envd_log, 600)}\n"
                               f"{criu_errors(work / 'restore.log')}")
    pid = int(pid_file.read_text().strip())
    if start_time(pid) is None:
        raise CheckpointFailed(f"restore of slot {record.slot}: init {pid} is gone")
    return pid
