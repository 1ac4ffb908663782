"""Process management behind the ``process.Process`` Connect service.

Every started command gets its own session (``setsid``), so its process group id is its
pid; ``ProcessTable`` owns the live processes, the SIGCHLD reaper reports their exits and
``kill_tree`` ends a whole tree. Processes outlive the RPC stream that started them and
can be re-attached by pid or tag; an exited process's end event is kept for 30 s.
"""

from bac_envd.process._exit import ExitInfo
from bac_envd.process._managed import DataChunk, ManagedProcess, ProcessSpec, ProcState
from bac_envd.process._spawn import SpawnError, SpawnRequest
from bac_envd.process._table import ProcessNotFound, ProcessTable
from bac_envd.process._tree import kill_tree

__all__ = [
    "DataChunk",
    "ExitInfo",
    "ManagedProcess",
    "ProcState",
    "ProcessNotFound",
    "ProcessSpec",
    "ProcessTable",
    "SpawnError",
    "SpawnRequest",
    "kill_tree",
]
