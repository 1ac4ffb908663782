"""What every handler needs from the request: the control plane and the template services,
settings, the caller's team, the ids in the path."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.requests import Request

from bac_server.config import sandbox_domain
from bac_server.control import ControlPlane, Team, TemplateServices
from bac_server.control.streams import StreamTokens


@dataclass(frozen=True)
class ApiSettings:
    domain: str
    envd_version: str
    max_body_bytes: int
    # The operator's token for the admin routes (``BAC_ADMIN_TOKEN``); empty: they are off.
    admin_token: str = ""
    # Hands out desktop stream tokens (``POST /sandboxes/{id}/streams``).
    streams: StreamTokens = field(default_factory=StreamTokens)


def plane(request: Request) -> ControlPlane:
    found: ControlPlane = request.app.state.plane
    return found


def settings(request: Request) -> ApiSettings:
    found: ApiSettings = request.app.state.api_settings
    return found


def public_domain(request: Request) -> str:
    """The domain of sandboxes' host names ``{port}-{id}.{domain}`` as this caller reaches
    the server: the configured one, with the port the request came to (from its Host)
    unless it is its scheme's default, so the SDKs' ``get_host(port)`` is an address that
    works as it is (``8080-<id>.localhost:3000``)."""
    return sandbox_domain(settings(request).domain, request.url.scheme, request.url.port)


async def team(request: Request) -> Team:
    """The caller's team from ``X-API-KEY``; raises ``Unauthenticated`` (401). Of several
    replicas, a sandbox the path names that this one has not heard of yet (made through
    another an instant ago) is read from the store first, so every handler finds it."""
    found = await plane(request).keys.authenticate(request.headers.get("x-api-key"))
    replicas = plane(request).replicas
    if replicas is not None and "sandbox_id" in request.path_params:
        await replicas.catch_up(sandbox_id(request))
    return found


def sandbox_id(request: Request) -> str:
    value: str = request.path_params["sandbox_id"]
    return value


def templates(request: Request) -> TemplateServices:
    return plane(request).templates


def template_ref(request: Request) -> str:
    value: str = request.path_params["template_id"]
    return value


def build_ref(request: Request) -> str:
    value: str = request.path_params["buildID"]
    return value
