"""All processes envd started, keyed by pid, and the SIGCHLD reaper that ends them.

envd reaps with ``waitpid(-1, WNOHANG)`` on every SIGCHLD: that also collects orphans
re-parented to envd when it is the sandbox's PID 1, which would otherwise pile up as
zombies. Statuses for pids envd does not know are dropped.
"""

from __future__ import annotations

import asyncio
import os
import signal

from bac_envd.process._managed import ManagedProcess, ProcState

RETENTION_SECONDS = 30.0


class ProcessNotFound(LookupError):
    """No live (or recently exited) process matches the selector."""


class ProcessTable:
    def __init__(self) -> None:
        self._procs: dict[int, ManagedProcess] = {}
        self._loop = asyncio.get_running_loop()

    def install_reaper(self) -> None:
        self._loop.add_signal_handler(signal.SIGCHLD, self.reap)
        self.reap()  # anything that exited before the handler existed

    def add(self, proc: ManagedProcess) -> None:
        # A retained, exited record may hold this pid already: the kernel reused it.
        old = self._procs.get(proc.pid)
        if old is not None and old.state is ProcState.EXITED:
            old.transition(ProcState.FORGOTTEN)
        self._procs[proc.pid] = proc

    def by_pid(self, pid: int) -> ManagedProcess:
        proc = self._procs.get(pid)
        if proc is None:
            raise ProcessNotFound(f"process with pid {pid} not found")
        return proc

    def by_tag(self, tag: str) -> ManagedProcess:
        matches = [p for p in self._procs.values() if p.spec.tag == tag]
        # Prefer a running process over a retained exited one with the same tag.
        matches.sort(key=lambda p: p.state is not ProcState.RUNNING)
        if not matches:
            raise ProcessNotFound(f"process with tag {tag} not found")
        return matches[0]

    def running(self) -> list[ManagedProcess]:
        return [p for p in self._procs.values() if p.state is ProcState.RUNNING]

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            proc = self._procs.get(pid)
            if proc is None or proc.state is not ProcState.RUNNING:
                continue
            proc.reaped(status)
            self._loop.call_later(RETENTION_SECONDS, self._forget, proc)

    def _forget(self, proc: ManagedProcess) -> None:
        if self._procs.get(proc.pid) is proc:
            del self._procs[proc.pid]
        if proc.state is ProcState.EXITED:
            proc.transition(ProcState.FORGOTTEN)

    def kill_all(self) -> None:
        """envd is exiting: nothing it started may outlive it."""
        for proc in self.running():
            proc.signal(signal.SIGKILL)
