"""``GET /health`` (liveness of the API) and ``GET /openapi.yaml`` (the API contract)."""

from __future__ import annotations

from functools import cache
from importlib import resources

from starlette.requests import Request
from starlette.responses import JSONResponse, Response


async def health(request: Request) -> Response:
    """On an API replica (docs/scale-out.md): ``leader``, whether the loops that run once
    (timers, health checks, metering, webhooks) run in this one, and ``nodes``, how many
    node agents its creates may go to now (a count: the endpoint needs no key)."""
    body: dict[str, object] = {"status": "ok"}
    plane = getattr(request.app.state, "plane", None)
    replicas = getattr(plane, "replicas", None)
    if replicas is not None:
        body["leader"] = bool(replicas.leading)
    placeable = getattr(getattr(plane, "backend", None), "placeable", None)
    if placeable is not None:
        body["nodes"] = len(placeable())
    return JSONResponse(body)


@cache
def _spec() -> bytes:
    return resources.files("bac_server.api").joinpath("openapi.yaml").read_bytes()


async def openapi(_request: Request) -> Response:
    return Response(_spec(), media_type="application/yaml")
