"""The real server (``create_app``: real store, backend, gateway, API) run inside the test's
event loop, on a clock the test moves: hours of sandbox life simulated without sleeping.

Everything but the clock is what ``bac serve`` runs; the test reaches the control plane
(``plane``) only to wait for the steps a clock move started (``advance``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from bac_process import TEMPLATES_DIR, free_port, fresh_data_dir

from bac_server.admin import create_key, uvicorn_options
from bac_server.app import create_app
from bac_server.config import ServerConfig
from bac_server.control import ControlPlane, EventKind, ManualClock, SandboxState
from bac_server.gateway import Dispatcher

START_BOUND_S = 90.0


@dataclass
class InProcessServer:
    url: str
    keys: list[str]
    clock: ManualClock
    app: Dispatcher
    data_dir: Path

    @property
    def plane(self) -> ControlPlane:
        plane = self.app.api.state.plane  # type: ignore[attr-defined]
        assert isinstance(plane, ControlPlane)
        return plane

    @property
    def metrics_url(self) -> str:
        """Where the metrics are scraped (their own listener)."""
        scrape = self.app.api.state.scrape  # type: ignore[attr-defined]
        return f"http://127.0.0.1:{scrape.port}/metrics"

    def opts(self, team: int = 0) -> dict[str, Any]:
        """Connection options for the official SDK (its sandboxes' traffic through this
        server's gateway, too)."""
        return {"api_url": self.url, "sandbox_url": self.url, "api_key": self.keys[team]}

    async def advance(self, seconds: float) -> None:
        """Move the clock and wait for every expiry and idle check it started."""
        self.clock.advance(seconds)
        await self.plane.lifecycle.settle()


@contextlib.asynccontextmanager
async def inprocess_server(label: str, *, teams: tuple[str, ...] = ("alpha",),
                           **config: Any) -> AsyncIterator[InProcessServer]:
    data_dir = fresh_data_dir(label)
    # Keys are minted on the data dir before the server opens it (as `bac keys` does).
    keys = [await asyncio.to_thread(create_key, team, "tests", data_dir=data_dir)
            for team in teams]
    port = free_port()
    settings = dataclasses.replace(
        ServerConfig(), host="127.0.0.1", port=port, data_dir=data_dir,
        templates_dir=Path(TEMPLATES_DIR), pool_size=1, pool_max=0, metrics_interval_s=0.5,
        **({"metrics_address": "127.0.0.1:0"} | config))
    clock = ManualClock()
    app = create_app(settings, clock=clock)
    assert isinstance(app, Dispatcher)
    options = uvicorn_options(settings) | {"log_level": "warning"}
    server = uvicorn.Server(uvicorn.Config(app, **options))
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(START_BOUND_S):
        # uvicorn says it is up only through this flag.
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("the server stopped before it started")
            await asyncio.sleep(0.02)
    running = InProcessServer(f"http://127.0.0.1:{port}", keys, clock, app, data_dir)
    try:
        yield running
    finally:
        try:
            await _end_all(running.plane)
        finally:
            server.should_exit = True
            await task
            await asyncio.to_thread(shutil.rmtree, data_dir, True)


async def _end_all(plane: ControlPlane) -> None:
    """Sandboxes outlive a server that stops; a test's must not outlive the test."""
    for sbx in plane.registry.all():
        async with sbx.lock:
            if sbx.state in (SandboxState.RUNNING, SandboxState.PAUSED):
                await plane.lifecycle.end(sbx, SandboxState.KILLED, EventKind.KILLED,
                                          "the test is over")
