"""Lazy loading of the Connect RPC services.

The RPC stack (connectrpc, protobuf-py, the generated messages) costs ~150 ms and
~15 MB on first import, more than everything else envd needs. It is imported on the
first RPC, in a short-lived thread so ``/health`` and ``/init`` keep being answered
meanwhile, or right after start with ``--preload``.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import types
from collections.abc import Callable

from bac_envd._http import ASGIApp
from bac_envd._state import EnvdState

# bac_envd._services.build_apps: the apps by procedure path, and the hook that ends what
# they started.
BuildApps = Callable[[EnvdState], tuple[dict[str, ASGIApp], Callable[[], None]]]


def _skip_connectrpc_version_lookup() -> None:
    # connectrpc/_version.py calls importlib.metadata.version(), which costs ~30 ms of
    # imports; the value only feeds the *client* User-Agent, and envd is never a client.
    if "connectrpc._version" not in sys.modules:
        stub = types.ModuleType("connectrpc._version")
        stub.__version__ = "0.12.1"  # type: ignore[attr-defined]
        sys.modules["connectrpc._version"] = stub


def import_services() -> BuildApps:
    _skip_connectrpc_version_lookup()
    import bac_envd._services as services

    return services.build_apps


class RpcServices:
    """Builds the process and filesystem ASGI apps once, on first use."""

    def __init__(self, state: EnvdState) -> None:
        self._state = state
        self._apps: dict[str, ASGIApp] | None = None
        self._loading: asyncio.Future[BuildApps] | None = None
        self._shutdown: Callable[[], None] | None = None

    def preload(self) -> None:
        """Start importing now, without waiting for it."""
        self._start_import()

    def _start_import(self) -> asyncio.Future[BuildApps]:
        if self._loading is None:
            loop = asyncio.get_running_loop()
            future: asyncio.Future[BuildApps] = loop.create_future()

            def run() -> None:
                try:
                    build_apps = import_services()
                except BaseException as exc:  # handed to the awaiting request
                    loop.call_soon_threadsafe(future.set_exception, exc)
                else:
                    loop.call_soon_threadsafe(future.set_result, build_apps)

            threading.Thread(target=run, name="envd-rpc-import", daemon=True).start()
            self._loading = future
        return self._loading

    async def app_for(self, path: str) -> ASGIApp | None:
        """The app serving the procedure at ``path``, None when envd serves none there."""
        if self._apps is None:
            build_apps = await asyncio.shield(self._start_import())
            if self._apps is None:
                self._apps, self._shutdown = build_apps(self._state)
        return self._apps.get(path)

    def shutdown(self) -> None:
        """Kill every process envd started (called when envd exits)."""
        if self._shutdown is not None:
            self._shutdown()
