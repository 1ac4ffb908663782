"""The RPC half of envd, imported lazily by ``_rpc`` (it pulls in connectrpc + protobuf)."""

from __future__ import annotations

from bac_envd._http import ASGIApp
from bac_envd._state import EnvdState
from bac_envd.filesystem._service import FilesystemService
from bac_envd.process._service import ProcessService
from bac_envd.process._table import ProcessTable
from bac_protocol.envd.filesystem_connect import FilesystemASGIApplication
from bac_protocol.envd.process_connect import ProcessASGIApplication

_table: ProcessTable | None = None
_filesystem: FilesystemService | None = None


def build_apps(state: EnvdState) -> dict[str, ASGIApp]:
    """The two Connect ASGI apps, keyed by their path prefix. Call once, in the loop."""
    global _table, _filesystem
    _table = ProcessTable()
    _table.install_reaper()
    _filesystem = FilesystemService(state)
    return {
        "/process.Process/": ProcessASGIApplication(ProcessService(state, _table)),
        "/filesystem.Filesystem/": FilesystemASGIApplication(_filesystem),
    }


def shutdown() -> None:
    if _table is not None:
        _table.kill_all()
    if _filesystem is not None:
        _filesystem.close_all()
