"""The OCI runtime command line (crun by default; runc and runsc take the same verbs).

Runtime calls are short processes. ``run --detach`` is started with ``posix_spawn`` so the
readiness pipe lands exactly on fd 3 (``--preserve-fds 1`` passes it into the sandbox);
its exit is awaited through a pidfd, without threads or a SIGCHLD handler.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


class RuntimeFailed(Exception):
    """A runtime command failed; the message carries its error output."""


async def _wait_pid(pid: int) -> int:
    pidfd = os.pidfd_open(pid)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    def exited() -> None:
        if not done.done():
            done.set_result(None)

    loop.add_reader(pidfd, exited)
    try:
        await done
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
    # The pidfd is readable: the child has exited, so this wait returns at once.
    _, status = os.waitpid(pid, os.WNOHANG)  # noqa: ASYNC222
    return os.waitstatus_to_exitcode(status)


def empty_stdin() -> int:
    """A close-on-exec pipe whose reads end at once: a runtime's stdin. Never the host's
    /dev/null: crun hands the container's stdio to its root user, which would give every
    sandbox's root the host's /dev/null."""
    empty, writer = os.pipe2(os.O_CLOEXEC)
    os.close(writer)
    return empty


async def wait_exit(pid: int) -> int:
    """The exit code of our child ``pid``, awaited through a pidfd."""
    return await _wait_pid(pid)


class OciRuntime:
    def __init__(self, binary: str, state_root: Path) -> None:
        found = shutil.which(binary)
        if found is None:
            raise RuntimeFailed(f"OCI runtime {binary!r} is not installed")
        self.binary = found
        self.name = Path(found).name
        self.state_root = state_root

    async def check(self) -> None:
        """Fail early, with the reason, on a runtime lacking what the backend relies on."""
        proc = await asyncio.create_subprocess_exec(
            self.binary, "run", "--help", stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        if b"preserve-fds" not in out:
            raise RuntimeFailed(f"{self.binary} has no 'run --preserve-fds' (needed to pass "
                                "envd's readiness pipe); use crun or runc")

    def _base(self) -> list[str]:
        return [self.binary, "--root", str(self.state_root)]

    async def _call(self, *args: str, quiet_missing: bool = False) -> str:
        proc = await asyncio.create_subprocess_exec(
            *self._base(), *args, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        if proc.returncode != 0:
            message = err.decode(errors="replace").strip()
            if quiet_missing and ("does not exist" in message or "not found" in message
                                  or "No such file" in message):
                return ""
            raise RuntimeFailed(f"{self.name} {args[0]} failed: {message}")
        return out.decode(errors="replace")

    async def run_detached(self, bundle: Path, container_id: str, *, ready_fd: int,
                           stdio: Path, log: Path, pid_file: Path) -> None:
        """Start the container and return once the runtime has exited (init keeps running)."""
        self.state_root.mkdir(mode=0o700, parents=True, exist_ok=True)
        argv = [*self._base(), "--log", str(log), "run", "--detach", "--preserve-fds", "1",
                "--pid-file", str(pid_file), "--bundle", str(bundle), container_id]
        out = os.open(stdio, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        empty = empty_stdin()
        try:
            # SECURITY: the child gets exactly stdin=an empty pipe, stdout/err=log, fd 3=ready
            # pipe; every other server fd is close-on-exec.
            # posix_spawn returns once the child is exec'd; its exit is awaited below.
            pid = os.posix_spawn(self.binary, argv, dict(os.environ), file_actions=[  # noqa: ASYNC221
                (os.POSIX_SPAWN_DUP2, empty, 0), (os.POSIX_SPAWN_DUP2, out, 1),
                (os.POSIX_SPAWN_DUP2, out, 2), (os.POSIX_SPAWN_DUP2, ready_fd, 3),
            ])
        finally:
            os.close(out)
            os.close(empty)
        code = await _wait_pid(pid)
        if code != 0:
            raise RuntimeFailed(f"{self.name} run exited {code}: {_tail(log)}")

    async def delete(self, container_id: str) -> None:
        """Kill and forget the container. Unknown ids are fine."""
        if not (self.state_root / container_id).exists():
            return  # never started by the runtime (restored by CRIU) or already deleted
        await self._call("delete", "--force", container_id, quiet_missing=True)

    async def pause(self, container_id: str) -> None:
        await self._call("pause", container_id)

    async def resume(self, container_id: str) -> None:
        await self._call("resume", container_id)

    async def update(self, container_id: str, resources: dict[str, Any]) -> None:
        with tempfile.NamedTemporaryFile("w", suffix=".json", dir=self.state_root) as handle:
            json.dump(resources, handle)
            handle.flush()
            await self._call("update", "--resources", handle.name, container_id)

    async def state(self, container_id: str) -> dict[str, Any] | None:
        out = await self._call("state", container_id, quiet_missing=True)
        if not out:
            return None
        data = json.loads(out)
        assert isinstance(data, dict)
        return data


def _tail(path: Path, limit: int = 2000) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return text[-limit:].strip() or "(empty log)"
