"""The OCI runtime command line (crun by default; runc and runsc take the same verbs).

Runtime calls are short processes. ``run --detach`` is started with ``posix_spawn`` so the
readiness pipe lands exactly on fd 3 (``--preserve-fds 1`` passes it into the sandbox);
its exit is awaited through a pidfd, without threads or a SIGCHLD handler. The runtime
processes started here never get a device as stdin, stdout or stderr (``spawn``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path

from ._files import log_tail


class RuntimeFailed(Exception):
    """A runtime command failed; the message carries its error output."""


async def pidfd_exited(pidfd: int) -> None:
    """Wait until the process behind ``pidfd`` has exited (its pidfd polls readable then)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not done.done():
            done.set_result(None)

    loop.add_reader(pidfd, readable)
    try:
        await done
    finally:
        loop.remove_reader(pidfd)


async def wait_exit(pid: int) -> int:
    """The exit code of our child ``pid``, awaited through a pidfd."""
    pidfd = os.pidfd_open(pid)
    try:
        await pidfd_exited(pidfd)
    finally:
        os.close(pidfd)
    # The pidfd is readable: the child has exited, so this wait returns at once.
    _, status = os.waitpid(pid, os.WNOHANG)  # noqa: ASYNC222
    return os.waitstatus_to_exitcode(status)


def empty_stdin() -> int:
    """A close-on-exec pipe whose reads end at once: a runtime's stdin. Never the host's
    /dev/null (see ``spawn``)."""
    empty, writer = os.pipe2(os.O_CLOEXEC)
    os.close(writer)
    return empty


def refuse_devices(fds: Sequence[int]) -> None:
    """Raise RuntimeFailed if any of ``fds`` is a device node (a runtime's stdio)."""
    for index, fd in enumerate(fds):
        mode = os.fstat(fd).st_mode
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            raise RuntimeFailed(f"refusing to start a runtime with a device as its fd {index}: "
                                "it would give the device to the sandbox's root")


def spawn(binary: str, argv: list[str], fds: Sequence[int]) -> int:
    """Start a runtime with exactly ``fds`` as its fds 0, 1, 2, ... (every other server fd
    is close-on-exec); returns its pid once it is exec'd."""
    # SECURITY: crun's run (1.8 here) fchowns its fds 0-2 that are not terminals to the
    # sandbox's root uid from the host's user namespace, devices included: given the host's
    # /dev/null, it hands that node to root in every sandbox, which binds it in. So a
    # runtime's stdio is never a device: pipes and files only, checked here, fail closed.
    refuse_devices(fds[:3])
    return os.posix_spawn(binary, argv, dict(os.environ), file_actions=[
        (os.POSIX_SPAWN_DUP2, fd, index) for index, fd in enumerate(fds)])


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
        (out, _), _ = await _communicate([self.binary, "run", "--help"], merge=True)
        if b"preserve-fds" not in out:
            raise RuntimeFailed(f"{self.binary} has no 'run --preserve-fds' (needed to pass "
                                "envd's readiness pipe); use crun or runc")

    def _base(self) -> list[str]:
        return [self.binary, "--root", str(self.state_root)]

    async def _call(self, *args: str, quiet_missing: bool = False) -> str:
        (out, err), code = await _communicate([*self._base(), *args])
        if code != 0:
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
            # stdin an empty pipe, stdout/err the log, fd 3 the ready pipe. posix_spawn
            # returns once the child is exec'd; its exit is awaited below.
            pid = spawn(self.binary, argv, (empty, out, out, ready_fd))
        finally:
            os.close(out)
            os.close(empty)
        code = await wait_exit(pid)
        if code != 0:
            raise RuntimeFailed(f"{self.name} run exited {code}: "
                                f"{log_tail(log, 2000) or '(no log)'}")

    async def delete(self, container_id: str) -> None:
        """Kill and forget the container. Unknown ids are fine."""
        if not (self.state_root / container_id).exists():
            return  # never started by the runtime (restored by CRIU) or already deleted
        await self._call("delete", "--force", container_id, quiet_missing=True)

async def _communicate(argv: list[str], *, merge: bool = False
                       ) -> tuple[tuple[bytes, bytes], int]:
    """Run a short runtime command with an empty stdin and its output piped (never a
    device, see ``spawn``): its (stdout, stderr) and exit code."""
    empty = empty_stdin()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=empty, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT if merge else asyncio.subprocess.PIPE)
    finally:
        os.close(empty)
    out, err = await proc.communicate()
    return (out, err or b""), proc.returncode or 0
