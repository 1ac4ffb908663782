"""The ASGI application: routes, and the context registry's life with the server's."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence

from starlette.applications import Starlette
from starlette.routing import Route

from bac_kernel._context_routes import (
    create_context,
    health,
    list_contexts,
    remove_context,
    restart_context,
)
from bac_kernel._contexts import ContextRegistry
from bac_kernel._execute_route import ExecuteEndpoint


def create_app(
    registry: ContextRegistry,
    *,
    prestart: Sequence[str] = ("python",),
    on_ready: Callable[[], None] | None = None,
) -> Starlette:
    """The kernel server app. `prestart` languages get their default context at start-up
    (in the background: executions wait for it); `on_ready` runs once routes are live."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if prestart:
            registry.spawn(registry.prestart(list(prestart)))
        if on_ready is not None:
            on_ready()
        try:
            yield
        finally:
            await registry.close()

    app = Starlette(
        routes=[
            Route("/execute", ExecuteEndpoint(registry), methods=["POST"]),
            Route("/contexts", create_context, methods=["POST"]),
            Route("/contexts", list_contexts, methods=["GET"]),
            Route("/contexts/{context_id}", remove_context, methods=["DELETE"]),
            Route("/contexts/{context_id}/restart", restart_context, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.registry = registry
    return app
