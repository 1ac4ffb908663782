"""Start one command: own session, the selected user's credentials, pipes or a PTY.

All parent-side fds are non-blocking and close-on-exec; the child's ends are closed in
the parent right after the fork so EOF/EIO arrive when the child side goes away.

Every command is the OOM killer's first choice in its sandbox: the child raises its own
``oom_score_adj`` to :data:`bac_envd.CHILD_OOM_SCORE_ADJ` before it drops to the user,
so a memory hog or fork bomb is killed before envd (which stays at its floor). The write
has to come before the switch: once the child has changed uid it is no longer dumpable,
its ``/proc/self`` files are root's and the user could not open them. That is why the
credential switch is done here rather than by ``Popen(user=...)``, which switches before
any hook runs.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import termios
from collections.abc import Callable
from dataclasses import dataclass

from bac_envd import CHILD_OOM_SCORE_ADJ
from bac_envd._errors import os_error_text
from bac_envd._users import User


class SpawnError(Exception):
    """The command could not be started (missing binary, bad cwd, permissions)."""


@dataclass(frozen=True)
class SpawnRequest:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    user: User
    pty_size: tuple[int, int] | None  # (cols, rows) for a PTY, None for pipes
    stdin: bool  # pipes only: a writable stdin pipe, else /dev/null


@dataclass
class Spawned:
    popen: subprocess.Popen[bytes]
    stdin_fd: int | None
    stdout_fd: int | None
    stderr_fd: int | None
    pty_fd: int | None

    @property
    def pid(self) -> int:
        return self.popen.pid


def set_winsize(fd: int, cols: int, rows: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def raise_oom_score() -> None:
    """Make the calling process (a child before exec) the OOM killer's first choice.
    Raising a score needs no privilege; lowering it again below its floor would."""
    fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, str(CHILD_OOM_SCORE_ADJ).encode())
    finally:
        os.close(fd)


def _child_setup(user: User | None, pty: bool) -> Callable[[], None]:
    """What the child runs after fork and ``setsid()``, before exec: its OOM score, the
    user's credentials, the PTY as its controlling terminal. Any failure raises, and
    Popen then reports the start as failed (the command never runs)."""

    def setup() -> None:
        raise_oom_score()
        if user is not None:
            # SECURITY: the child drops to the selected user's groups, gid and uid in this
            # order (setgroups needs root, setreuid last), and checks that no root id is
            # left in any of the real, effective or saved slots before exec.
            os.setgroups(list(user.groups))
            os.setregid(user.gid, user.gid)
            os.setreuid(user.uid, user.uid)
            if os.getresuid() != (user.uid,) * 3 or os.getresgid() != (user.gid,) * 3:
                raise OSError("the credential switch did not take")
        if pty:
            # After setsid(): the PTY slave on fd 0 becomes the session's controlling
            # terminal (job control, SIGWINCH, ^C all need it).
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    return setup


def _check_cwd(cwd: str) -> None:
    if not os.path.isdir(cwd):
        if os.path.exists(cwd):
            raise SpawnError(f"cwd '{cwd}' is not a directory")
        raise SpawnError(f"cwd '{cwd}' does not exist")


def spawn(request: SpawnRequest) -> Spawned:
    _check_cwd(request.cwd)
    if not request.argv or not request.argv[0]:
        raise SpawnError("empty command")
    if request.pty_size is not None:
        return _spawn_pty(request, request.pty_size)
    return _spawn_pipes(request)


def _popen(request: SpawnRequest, **kwargs: object) -> subprocess.Popen[bytes]:
    # Unprivileged envd (tests, rootless images) can only run as itself.
    user = request.user if os.geteuid() == 0 else None
    try:
        return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
            request.argv,
            env=request.env,
            cwd=request.cwd,
            start_new_session=True,
            close_fds=True,
            preexec_fn=_child_setup(user, pty=request.pty_size is not None),
            **kwargs,
        )
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        command = " ".join(request.argv)
        raise SpawnError(f"error starting process '{command}': {os_error_text(exc)}") from exc


def _spawn_pipes(request: SpawnRequest) -> Spawned:
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    in_r, in_w = os.pipe2(os.O_CLOEXEC) if request.stdin else (subprocess.DEVNULL, None)
    child_ends = [fd for fd in (out_w, err_w, in_r) if fd >= 0]
    try:
        popen = _popen(request, stdin=in_r, stdout=out_w, stderr=err_w)
    except SpawnError:
        for fd in (out_r, err_r, in_w):
            if fd is not None:
                os.close(fd)
        raise
    finally:
        for fd in child_ends:
            os.close(fd)
    for fd in (out_r, err_r, in_w):
        if fd is not None:
            os.set_blocking(fd, False)
    return Spawned(popen, in_w, out_r, err_r, None)


def _spawn_pty(request: SpawnRequest, size: tuple[int, int]) -> Spawned:
    master, slave = os.openpty()
    try:
        set_winsize(slave, *size)
        popen = _popen(
            request,
            stdin=slave,
            stdout=slave,
            stderr=slave,
        )
    except SpawnError:
        os.close(master)
        raise
    except OSError as exc:
        os.close(master)
        raise SpawnError(f"error starting pty: {os_error_text(exc)}") from exc
    finally:
        os.close(slave)
    os.set_blocking(master, False)
    return Spawned(popen, None, None, None, master)
