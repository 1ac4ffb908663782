"""A template's start command, run as its user and restarted when it exits.

    python3 -m bac_envd._supervisor [--ready-fd N] [--config PATH]

envd starts this process at boot when the template has ``/etc/bac/start.json`` (written
by the template builder) and hands it its own readiness pipe: the host's create returns
once the *service* is ready, not only envd. So a created (or pooled) code-interpreter
sandbox already has its kernel server listening and its first kernel starting.

It lives beside envd rather than in the host's backend because it must outlive host
restarts and work the same for cold, pooled and resumed sandboxes; and in a process of
its own so envd's start-up and request path stay untouched (a sandbox without a start
command pays nothing). It runs as sandbox root, which the user can reach with sudo
anyway; the service runs as the configured user, in a session of its own so that
everything it started is killed with it before a restart.

Ready, one of two ways:

- ``ready_line`` (the default): the service gets the write end of a pipe in place of
  ``{ready_fd}`` in its argv and writes this line there once it serves;
- ``ready_cmd``: a shell command run as the user every ``READY_POLL_S`` until it exits 0
  (what E2B templates' ready commands are: ``curl ...``, ``ss ...``, ``test -f ...``). A
  start.json with ``ready_cmd`` and no ``argv`` only waits for readiness.

envd's pipe is written on the first ready, or after ``READY_BOUND_S`` at the latest (the
sandbox is usable without the service: its commands and files still work), which keeps
create within envd's own start timeout. Restarts back off from 0.5 s to 10 s; a run of
30 s resets the backoff.

(Longer than 250 lines because both readiness modes share the spawn, the user switch and
the restart loop; split, each half would repeat them.)

Errors::

    StartConfigError    start.json is missing fields or malformed (the service never runs)
"""

from __future__ import annotations

import json
import os
import pwd
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

START_FILE = "/etc/bac/start.json"
READY_BOUND_S = 10.0
READY_POLL_S = 0.25
READY_CMD_TIMEOUT_S = 5.0  # one ready check that hangs counts as "not ready yet"
_BACKOFF_MIN_S, _BACKOFF_MAX_S, _STABLE_S = 0.5, 10.0, 30.0
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class StartConfigError(Exception):
    """The template's start command description is unusable."""


@dataclass(frozen=True)
class StartConfig:
    argv: tuple[str, ...]
    user: str
    cwd: str
    env: dict[str, str]
    ready_line: bytes
    restart: bool
    ready_cmd: str | None = None


def load_config(path: str = START_FILE) -> StartConfig:
    try:
        with open(path, encoding="utf-8") as handle:
            raw = json.load(handle)
        ready_cmd = raw.get("ready_cmd")
        argv = tuple(raw["argv"] if ready_cmd is None else raw.get("argv", ()))
        env = {str(k): str(v) for k, v in raw.get("env", {}).items()}
        config = StartConfig(argv=argv, user=str(raw.get("user", "root")),
                             cwd=str(raw.get("cwd", "/")), env=env,
                             ready_line=str(raw.get("ready_line", "ready\n")).encode(),
                             restart=bool(raw.get("restart", True)), ready_cmd=ready_cmd)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StartConfigError(f"{path}: {exc}") from exc
    if ready_cmd is not None and (not isinstance(ready_cmd, str) or not ready_cmd.strip()):
        raise StartConfigError(f"{path}: ready_cmd must be a non-empty string")
    if not all(isinstance(a, str) for a in argv) or (not argv and ready_cmd is None):
        raise StartConfigError(f"{path}: argv must be a non-empty list of strings")
    return config


def _say(message: str) -> None:
    print(f"bac_envd supervisor: {message}", file=sys.stderr, flush=True)


class Supervisor:
    def __init__(self, config: StartConfig, ready_fd: int | None) -> None:
        self.config = config
        self._ready_fd = ready_fd
        self._deadline = time.monotonic() + READY_BOUND_S
        self._proc: subprocess.Popen[bytes] | None = None

    def signal_ready(self, why: str) -> None:
        if self._ready_fd is None:
            return
        _say(f"reporting ready ({why})")
        try:
            os.write(self._ready_fd, b"ready\n")
        except OSError:
            pass  # nobody waits any more (the host gave up): nothing to report to
        os.close(self._ready_fd)
        self._ready_fd = None

    def _user(self) -> tuple[pwd.struct_passwd, dict[str, str]]:
        entry = pwd.getpwnam(self.config.user)
        env = {"PATH": _PATH, "HOME": entry.pw_dir, "USER": entry.pw_name,
               "LOGNAME": entry.pw_name, "SHELL": entry.pw_shell or "/bin/sh",
               "LANG": "C.UTF-8", **self.config.env}
        return entry, env

    def _popen(self, argv: list[str], ready_w: int | None) -> subprocess.Popen[bytes]:
        entry, env = self._user()
        cwd = self.config.cwd if os.path.isdir(self.config.cwd) else "/"
        return subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            pass_fds=() if ready_w is None else (ready_w,),
            user=entry.pw_uid, group=entry.pw_gid,
            extra_groups=os.getgrouplist(entry.pw_name, entry.pw_gid),
            start_new_session=True)

    def _spawn(self, ready_w: int | None) -> subprocess.Popen[bytes]:
        if ready_w is None:
            return self._popen(list(self.config.argv), None)
        return self._popen([a.replace("{ready_fd}", str(ready_w)) for a in self.config.argv],
                           ready_w)

    def _check_ready(self) -> bool:
        """One run of the ready command; True when it exits 0 in time."""
        assert self.config.ready_cmd is not None
        try:
            check = self._popen(["/bin/sh", "-c", self.config.ready_cmd], None)
        except (OSError, KeyError, subprocess.SubprocessError) as exc:
            _say(f"cannot run the ready command: {exc}")
            return False
        try:
            return check.wait(timeout=READY_CMD_TIMEOUT_S) == 0
        except subprocess.TimeoutExpired:
            return False
        finally:
            try:
                os.killpg(check.pid, signal.SIGKILL)  # whatever the check left running
            except OSError:
                pass
            check.wait()

    def _await_ready(self, ready_r: int) -> None:
        """Read the service's pipe until its ready line or EOF (it exited)."""
        buffer = b""
        while True:
            timeout = None if self._ready_fd is None else \
                max(0.0, self._deadline - time.monotonic())
            readable, _, _ = select.select([ready_r], [], [], timeout)
            if not readable:
                self.signal_ready(f"not ready after {READY_BOUND_S:.0f}s; still waiting")
                continue
            chunk = os.read(ready_r, 256)
            buffer += chunk
            if self.config.ready_line in buffer:
                self.signal_ready("service ready")
                return
            if not chunk:
                return

    def _poll_ready(self) -> None:
        """Run the ready command until it succeeds, the service exits, or (once envd was
        told) there is nobody left to tell."""
        while self._ready_fd is not None:
            if self._check_ready():
                self.signal_ready("ready command succeeded")
                return
            if time.monotonic() >= self._deadline:
                self.signal_ready(f"not ready after {READY_BOUND_S:.0f}s; still starting")
                return
            # The pause between checks; returns at once when the service exits.
            if self._proc is None:
                time.sleep(READY_POLL_S)
                continue
            try:
                self._proc.wait(timeout=READY_POLL_S)
            except subprocess.TimeoutExpired:
                continue
            return

    def run_once(self) -> int:
        if self.config.ready_cmd is not None:
            try:
                self._proc = self._spawn(None)
            except (OSError, KeyError, subprocess.SubprocessError) as exc:
                _say(f"cannot start {self.config.argv[0]}: {exc}")
                return 127
            self._poll_ready()
            return self._reap()
        ready_r, ready_w = os.pipe()
        try:
            try:
                self._proc = self._spawn(ready_w)
            except (OSError, KeyError, subprocess.SubprocessError) as exc:
                _say(f"cannot start {self.config.argv[0]}: {exc}")
                return 127
            finally:
                os.close(ready_w)
            self._await_ready(ready_r)
        finally:
            os.close(ready_r)
        return self._reap()

    def _reap(self) -> int:
        assert self._proc is not None
        code = self._proc.wait()
        self._kill_group(signal.SIGKILL)
        return code

    def _kill_group(self, signum: int) -> None:
        if self._proc is not None:
            try:
                os.killpg(self._proc.pid, signum)
            except OSError:
                pass  # the group is already empty

    def run(self) -> None:
        if not self.config.argv:  # only a ready command: nothing to keep running
            self._poll_ready()
            return
        backoff = _BACKOFF_MIN_S
        while True:
            started = time.monotonic()
            code = self.run_once()
            _say(f"{' '.join(self.config.argv[:3])} exited with {code}")
            if not self.config.restart:
                self.signal_ready("service exited; not restarted")
                return
            if time.monotonic() - started > _STABLE_S:
                backoff = _BACKOFF_MIN_S
            if self._ready_fd is not None and time.monotonic() + backoff > self._deadline:
                self.signal_ready("service keeps failing; still restarting it")
            # A real delay between restarts (backoff), not a synchronisation.
            time.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX_S)

    def stop(self, signum: int, frame: object) -> None:
        self._kill_group(signal.SIGTERM)
        raise SystemExit(0)


def _options(argv: list[str]) -> dict[str, str]:
    """``--ready-fd N`` and ``--config PATH`` (tests point it at their own file)."""
    pairs = dict(zip(argv[::2], argv[1::2], strict=False))
    return {k: v for k, v in pairs.items() if k in ("--ready-fd", "--config")}


def _raise_oom_score() -> None:
    """This process and everything it starts go before envd when memory runs out
    (``bac_envd.CHILD_OOM_SCORE_ADJ``); raising a score needs no privilege."""
    from bac_envd import CHILD_OOM_SCORE_ADJ

    try:
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write(str(CHILD_OOM_SCORE_ADJ))
    except OSError as exc:
        _say(f"cannot raise its OOM score: {exc}")


def main(argv: list[str]) -> int:
    _raise_oom_score()
    options = _options(argv)
    ready_fd = int(options["--ready-fd"]) if "--ready-fd" in options else None
    supervisor: Supervisor | None = None
    try:
        supervisor = Supervisor(load_config(options.get("--config", START_FILE)), ready_fd)
    except StartConfigError as exc:
        _say(str(exc))
        if ready_fd is not None:
            os.write(ready_fd, b"ready\n")
            os.close(ready_fd)
        return 1
    signal.signal(signal.SIGTERM, supervisor.stop)
    supervisor.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
