"""``GET /health`` (liveness of the API) and ``GET /openapi.yaml`` (the API contract)."""

from __future__ import annotations

from functools import cache
from importlib import resources

from starlette.requests import Request
from starlette.responses import JSONResponse, Response


async def health(request: Request) -> Response:
    """``leader`` on an API replica among several (docs/scale-out.md): whether the loops
    that run once (timers, health checks, metering, webhooks) run in this one."""
    body: dict[str, object] = {"status": "ok"}
    plane = getattr(request.app.state, "plane", None)
    replicas = getattr(plane, "replicas", None)
    if replicas is not None:
        body["leader"] = bool(replicas.leading)
    return JSONResponse(body)


@cache
def _spec() -> bytes:
    return resources.files("bac_server.api").joinpath("openapi.yaml").read_bytes()


async def openapi(_request: Request) -> Response:
    return Response(_spec(), media_type="application/yaml")
