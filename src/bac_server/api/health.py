"""``GET /health`` (liveness of the API) and ``GET /openapi.yaml`` (the API contract)."""

from __future__ import annotations

from functools import cache
from importlib import resources

from starlette.requests import Request
from starlette.responses import JSONResponse, Response


async def health(_request: Request) -> Response:
    return JSONResponse({"status": "ok"})


@cache
def _spec() -> bytes:
    return resources.files("bac_server.api").joinpath("openapi.yaml").read_bytes()


async def openapi(_request: Request) -> Response:
    return Response(_spec(), media_type="application/yaml")
