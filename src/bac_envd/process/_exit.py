"""A process's end event, in the exact words of Go's ``os.ProcessState`` (E2B envd)."""

from __future__ import annotations

import os
from dataclasses import dataclass

# Go's syscall signal names on Linux: the SDK surfaces ``status``/``error`` verbatim.
_GO_SIGNAL_NAMES = {
    1: "hangup",
    2: "interrupt",
    3: "quit",
    4: "illegal instruction",
    5: "trace/breakpoint trap",
    6: "aborted",
    7: "bus error",
    8: "floating point exception",
    9: "killed",
    10: "user defined signal 1",
    11: "segmentation fault",
    12: "user defined signal 2",
    13: "broken pipe",
    14: "alarm clock",
    15: "terminated",
    16: "stack fault",
    17: "child exited",
    18: "continued",
    19: "stopped (signal)",
    20: "stopped",
    21: "stopped (tty input)",
    22: "stopped (tty output)",
    23: "urgent I/O condition",
    24: "CPU time limit exceeded",
    25: "file size limit exceeded",
    26: "virtual timer expired",
    27: "profiling timer expired",
    28: "window changed",
    29: "I/O possible",
    30: "power failure",
    31: "bad system call",
}


@dataclass(frozen=True)
class ExitInfo:
    exit_code: int
    exited: bool
    status: str
    error: str | None

    @classmethod
    def from_wait_status(cls, wait_status: int) -> ExitInfo:
        if os.WIFEXITED(wait_status):
            code = os.WEXITSTATUS(wait_status)
            status = f"exit status {code}"
            return cls(code, True, status, status if code else None)
        if os.WIFSIGNALED(wait_status):
            signum = os.WTERMSIG(wait_status)
            name = _GO_SIGNAL_NAMES.get(signum, f"signal {signum}")
            status = f"signal: {name}"
            if os.WCOREDUMP(wait_status):
                status += " (core dumped)"
            return cls(-1, False, status, status)
        # Stopped/continued statuses never reach here (no WUNTRACED), kept total anyway.
        return cls(-1, False, "unknown", "unknown")
