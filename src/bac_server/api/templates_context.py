"""What template handlers need from the request: the template services."""

from __future__ import annotations

from starlette.requests import Request

from bac_server.control.templates_services import TemplateServices


def templates(request: Request) -> TemplateServices:
    found: TemplateServices = request.app.state.templates
    return found


def template_ref(request: Request) -> str:
    value: str = request.path_params["template_id"]
    return value


def build_ref(request: Request) -> str:
    value: str = request.path_params["buildID"]
    return value
