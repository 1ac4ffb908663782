"""The RPC half of envd, imported lazily by ``_rpc`` (it pulls in connectrpc + protobuf)."""

from __future__ import annotations

from collections.abc import Callable

from protobuf import DescService

from bac_envd._http import ASGIApp
from bac_envd._rpccodec import request_codecs
from bac_envd._state import EnvdState
from bac_envd.filesystem._service import FilesystemService
from bac_envd.process._service import ProcessService
from bac_envd.process._table import ProcessTable
from bac_protocol.envd.filesystem_connect import Filesystem, FilesystemASGIApplication
from bac_protocol.envd.process_connect import Process, ProcessASGIApplication


def build_apps(state: EnvdState) -> tuple[dict[str, ASGIApp], Callable[[], None]]:
    """The two Connect ASGI apps keyed by the path of each procedure they serve, and the
    hook that ends everything they started (process trees, watchers). Call once, inside
    the event loop."""
    table = ProcessTable()
    table.install_reaper()
    filesystem = FilesystemService(state)
    codecs = request_codecs()
    served: list[tuple[DescService, ASGIApp]] = [
        (Process.desc(), ProcessASGIApplication(ProcessService(state, table), codecs=codecs)),
        (Filesystem.desc(), FilesystemASGIApplication(filesystem, codecs=codecs)),
    ]
    apps = {f"/{service.type_name}/{method.name}": app
            for service, app in served for method in service.methods}

    def shutdown() -> None:
        table.kill_all()
        filesystem.close_all()

    return apps, shutdown
