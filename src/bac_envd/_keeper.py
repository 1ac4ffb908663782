"""The sandbox's PID 1: keeps envd running, reaps orphans, remembers what ``/init`` set.

``python3 -m bac_envd`` started as the first process of a sandbox's pid namespace
listens, reports ready, and then forks: the child is envd (the bootstrap front, then the
server), the parent stays behind as this keeper. When envd dies (an OOM kill despite its
score, a ``kill -9`` from root inside, a bug) the keeper forks a new one:

- from the same interpreter, before anything heavy was imported, so the restart costs a
  fork, not an interpreter start, and the keeper's pages stay shared with envd's;
- on the same listening socket, which the keeper holds: clients that connect during the
  restart wait in the backlog instead of being refused;
- with the access token, env vars and defaults ``/init`` set: envd writes each applied
  ``/init`` here (``EnvdState.forward``, a pipe) before it answers, the keeper applies it
  to its own ``EnvdState``, and a new envd is a fork that starts with that copy. It
  lives only in the memory of root's processes, never on the sandbox's disk (so never in
  a snapshot's files or a template made from one);
- and it tells the host: an ``envd_restarted`` report on the trace socket with the
  number of restarts so far and how the last envd ended.

The keeper itself cannot be killed from inside: the kernel drops every signal sent to a
pid namespace's init from within it unless a handler is installed, and it installs
handlers for SIGTERM (the runtime's stop) and SIGCHLD only. If it exits, the kernel ends
the sandbox, which the host sees as a crash, as before. A pause or checkpoint dumps the
whole tree from here (CRIU), the keeper's pipes and memory included.

An envd that keeps dying is restarted after a growing pause (``RESTART_BACKOFF_*``);
one that ran ``STABLE_S`` resets it. The keeper never gives up: the host marks a
sandbox whose envd stays unreachable ``unhealthy``.

Built on C-level modules only (``_socket``, ``_signal``, ``select``), like the bootstrap
front: the keeper's own pages are the interpreter's, shared with envd after the fork.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # no stub; `signal` would load enum
import _socket
import os
import select
import sys
import time

from bac_envd._state import EnvdState

# ``typing`` (or ``collections.abc``) only for an annotation would be loaded by PID 1
# before it forks: the keeper imports nothing it does not run.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

RESTART_BACKOFF_MIN_S, RESTART_BACKOFF_MAX_S, STABLE_S = 0.1, 5.0, 10.0
TRACE_SOCKET = os.environ.get("BAC_ENVD_TRACE_SOCKET", "/run/bac/trace.sock")

_kept = False


def kept() -> bool:
    """True in an envd a keeper started (the sandbox's envd, not one run by hand)."""
    return _kept


def _say(message: str) -> None:
    print(f"bac_envd keeper: {message}", file=sys.stderr, flush=True)


def report_restart(count: int, status: int, lived_s: float,
                   path: str = TRACE_SOCKET) -> bool:
    """One ``envd_restarted`` datagram to the host (see ``bac_envd._trace``)."""
    if not path:
        return False
    code = os.waitstatus_to_exitcode(status)
    end = f'"signal":{-code}' if code < 0 else f'"exit_code":{code}'
    data = (f'{{"kind":"envd_restarted","count":{count},{end},'
            f'"uptime_s":{lived_s:.3f}}}').encode()
    try:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM | _socket.SOCK_CLOEXEC)
    except OSError:
        return False
    try:
        sock.sendto(data, _socket.MSG_DONTWAIT, path)
    except OSError:
        return False
    finally:
        sock.close()
    return True


class Keeper:
    """Forks envd with ``serve`` (which never returns in the child) and restarts it."""

    def __init__(self, state: EnvdState, serve: Callable[[], None]) -> None:
        self._state = state
        self._serve = serve
        self._inits_r, inits_w = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(self._inits_r, False)
        # Envd's writes block (a whole frame, or envd waits): the keeper always drains.
        state.forward = inits_w
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._pending = bytearray()
        self.envd_pid = 0
        self.restarts = 0

    def _fork(self) -> int:
        pid = os.fork()
        if pid:
            return pid
        # The new envd: nothing of the keeper's loop survives into it.
        global _kept
        _kept = True
        _signal.set_wakeup_fd(-1)
        _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
        for fd in (self._inits_r, self._wake_r, self._wake_w):
            os.close(fd)
        try:
            self._serve()
        finally:
            os._exit(1)  # envd returned or raised: the keeper starts another
        raise AssertionError("unreachable")  # pragma: no cover

    def _take_inits(self) -> None:
        """Apply every complete ``/init`` frame envd wrote (4-byte length, JSON body)."""
        while True:
            try:
                chunk = os.read(self._inits_r, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            self._pending += chunk
        from bac_envd._bootstrap import _loads

        while len(self._pending) >= 4:
            size = int.from_bytes(self._pending[:4], "big")
            if len(self._pending) < 4 + size:
                break
            body = bytes(self._pending[4:4 + size])
            del self._pending[:4 + size]
            try:
                self._state.apply_init(_loads(body), forward=False)
            except Exception as exc:  # envd validated it first; keep what the keeper has
                _say(f"dropped an /init copy: {exc}")

    def _reap(self) -> int | None:
        """Reap every exited child (orphans re-parented here too); envd's status if it
        was among them."""
        ended: int | None = None
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return ended
            if pid == 0:
                return ended
            if pid == self.envd_pid:
                ended = status

    def run(self) -> None:
        _signal.set_wakeup_fd(self._wake_w)
        _signal.signal(_signal.SIGCHLD, lambda signum, frame: None)
        poller = select.epoll()
        poller.register(self._inits_r, select.EPOLLIN)
        poller.register(self._wake_r, select.EPOLLIN)
        backoff = RESTART_BACKOFF_MIN_S
        self.envd_pid, started = self._fork(), time.monotonic()
        restart_at: float | None = None
        while True:
            timeout = -1.0 if restart_at is None else max(0.0, restart_at - time.monotonic())
            for fd, _ in poller.poll(timeout):
                if fd == self._wake_r:
                    while True:
                        try:
                            if not os.read(self._wake_r, 512):
                                break
                        except BlockingIOError:
                            break
            self._take_inits()
            status = self._reap()
            if status is not None:
                lived = time.monotonic() - started
                # Whatever the dead envd wrote is in; half a frame is half an /init
                # it never answered.
                self._take_inits()
                self._pending.clear()
                self.restarts += 1
                _say(f"envd (pid {self.envd_pid}) ended after {lived:.1f}s with status "
                     f"{status}; restart {self.restarts}")
                report_restart(self.restarts, status, lived)
                backoff = RESTART_BACKOFF_MIN_S if lived >= STABLE_S else backoff
                restart_at = time.monotonic() + (0.0 if lived >= STABLE_S else backoff)
                backoff = min(backoff * 2, RESTART_BACKOFF_MAX_S)
                self.envd_pid = 0
            if restart_at is not None and time.monotonic() >= restart_at:
                self.envd_pid, started, restart_at = self._fork(), time.monotonic(), None
