"""Start one command: own session, the selected user's credentials, pipes or a PTY.

All parent-side fds are non-blocking and close-on-exec; the child's ends are closed in
the parent right after the spawn so EOF/EIO arrive when the child side goes away.

Every command is the OOM killer's first choice in its sandbox: the child raises its own
``oom_score_adj`` to :data:`bac_envd.CHILD_OOM_SCORE_ADJ` before it drops to the user,
so a memory hog or fork bomb is killed before envd (which stays at its floor). The write
has to come before the switch: once the child has changed uid it is no longer dumpable,
its ``/proc/self`` files are root's and the user could not open them. That is why the
credential switch is done by envd's code rather than by ``Popen(user=...)``, which
switches before any hook runs.

Two ways to do it, the same steps in the same order (OOM score, groups → gid → uid and
the check that no root id is left, the PTY as controlling terminal, exec):

* **bac-spawn** (``spawn_helper.c``, built static into envd's bundle next to this module):
  ``Popen`` starts it without a ``preexec_fn``, which lets CPython vfork instead of
  forking the whole envd process (a fork copies envd's page tables and then both sides
  take copy-on-write faults: about 3 ms a command against under 1 ms). It reports a
  failed step down a close-on-exec pipe, read here until the command has exec'd, so a
  start that fails is reported as failed, with the same messages, and nothing ran.
* **preexec_fn** (:func:`_child_setup`): where the helper is not there (envd run from a
  source tree without it built): fork, and the steps in Python in the child.
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



def _bundled_helper() -> str | None:
    path = os.path.join(os.path.dirname(__file__), HELPER_NAME)
    return path if os.access(path, os.X_OK) else None


HELPER_NAME = "bac-spawn"
# The helper as the bundle ships it (module-level so tests can point it elsewhere).
HELPER = _bundled_helper()
_HOOK_FAILED = "Exception occurred in preexec_fn."  # CPython's text for a failed hook


def _popen(request: SpawnRequest, **kwargs: object) -> subprocess.Popen[bytes]:
    # Unprivileged envd (tests, rootless images) can only run as itself.
    user = request.user if os.geteuid() == 0 else None
    try:
        if HELPER is not None:
            return _popen_helper(HELPER, request, user, **kwargs)
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


def _candidates(argv0: str, env: dict[str, str]) -> list[str]:
    """The paths CPython's Popen would try for ``argv0``, in its order."""
    if os.path.dirname(argv0):
        return [argv0]
    return [os.path.join(directory, argv0) for directory in os.get_exec_path(env)]


def _popen_helper(helper: str, request: SpawnRequest, user: User | None,
                  **kwargs: object) -> subprocess.Popen[bytes]:
    """Start the command through bac-spawn (vfork, see the module docstring); raise as
    Popen would if a step before the command's exec failed."""
    argv0 = request.argv[0]
    flags = ("u" if user is not None else "") + ("t" if request.pty_size is not None else "")
    groups = ",".join(str(g) for g in user.groups) if user is not None and user.groups else "-"
    candidates = _candidates(argv0, request.env)
    report_r, report_w = os.pipe2(os.O_CLOEXEC)
    try:
        try:
            popen: subprocess.Popen[bytes] = subprocess.Popen(  # type: ignore[call-overload]
                [helper, str(report_w), str(CHILD_OOM_SCORE_ADJ), flags or "-",
                 str(user.uid if user is not None else 0),
                 str(user.gid if user is not None else 0),
                 groups, str(len(candidates)), *candidates, "--", *request.argv],
                executable=helper,
                env=request.env,
                cwd=request.cwd,
                start_new_session=True,
                close_fds=True,
                pass_fds=(report_w,),
                **kwargs,
            )
        finally:
            os.close(report_w)
        # EOF once the command has exec'd (the pipe is close-on-exec in the helper), or
        # the failed step: the helper has exited, nothing of the command ran.
        report = b""
        while chunk := os.read(report_r, 256):
            report += chunk
    finally:
        os.close(report_r)
    if not report:
        return popen
    popen.wait()
    stage, _, number = report.decode(errors="replace").strip().partition(" ")
    errno = int(number) if number.isdigit() else 0
    if stage == "exec" and errno:
        raise OSError(errno, os.strerror(errno), argv0)
    raise subprocess.SubprocessError(_HOOK_FAILED)


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
