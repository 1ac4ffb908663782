"""Start one command: own session, the selected user's credentials, pipes or a PTY.

All parent-side fds are non-blocking and close-on-exec; the child's ends are closed in
the parent right after the fork so EOF/EIO arrive when the child side goes away.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import termios
from dataclasses import dataclass

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


def _acquire_controlling_tty() -> None:
    # Runs in the child after setsid() and the credential switch: makes the PTY slave on
    # fd 0 the session's controlling terminal (job control, SIGWINCH, ^C all need it).
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _credentials(user: User) -> dict[str, object]:
    if os.geteuid() != 0:
        # Unprivileged envd (tests, rootless images) can only run as itself.
        return {}
    # SECURITY: the child drops to the selected user's uid, gid and groups before exec;
    # Popen applies setgroups → setregid → setreuid in that order, so no root gid or
    # supplementary group survives into the command.
    return {"user": user.uid, "group": user.gid, "extra_groups": list(user.groups)}


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
    try:
        return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
            request.argv,
            env=request.env,
            cwd=request.cwd,
            start_new_session=True,
            close_fds=True,
            **_credentials(request.user),
            **kwargs,
        )
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        raise SpawnError(f"error starting process '{' '.join(request.argv)}': {exc}") from exc


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
            preexec_fn=_acquire_controlling_tty,
        )
    except SpawnError:
        os.close(master)
        raise
    except OSError as exc:
        os.close(master)
        raise SpawnError(f"error starting pty: {exc}") from exc
    finally:
        os.close(slave)
    os.set_blocking(master, False)
    return Spawned(popen, None, None, None, master)
