"""The RPC half of envd, imported lazily by ``_rpc`` (it pulls in connectrpc + protobuf)."""

from __future__ import annotations

from collections.abc import Callable

from bac_envd._http import ASGIApp
from bac_envd._state import EnvdState
from bac_envd.filesystem._service import FilesystemService
from bac_envd.process._service import ProcessService
from bac_envd.process._table import ProcessTable
from bac_protocol.envd.filesystem_connect import FilesystemASGIApplication
from bac_protocol.envd.process_connect import ProcessASGIApplication


def build_apps(state: EnvdState) -> tuple[dict[str, ASGIApp], Callable[[], None]]:
    """The two Connect ASGI apps keyed by path prefix, and the hook that ends everything
    they started (process trees, watchers). Call once, inside the event loop."""
    table = ProcessTable()
    table.install_reaper()
    filesystem = FilesystemService(state)
    apps: dict[str, ASGIApp] = {
        "/process.Process/": ProcessASGIApplication(ProcessService(state, table)),
        "/filesystem.Filesystem/": FilesystemASGIApplication(filesystem),
    }

    def shutdown() -> None:
        table.kill_all()
        filesystem.close_all()

    return apps, shutdown
