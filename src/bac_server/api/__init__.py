"""The E2B-compatible REST API (transport only: parse, call the control plane, map errors)."""

from bac_server.api.context import ApiSettings
from bac_server.api.routes import ROUTES, build_api

__all__ = ["ROUTES", "ApiSettings", "build_api"]
