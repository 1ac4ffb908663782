"""What every page needs: the settings, the control plane, the sessions and the renderer,
kept on the dashboard application's state, and the page renderer itself (Jinja2, every
value escaped)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import HTTPConnection, Request
from starlette.responses import HTMLResponse

from bac_server.control import ControlPlane, NotSupported
from bac_server.control.streams import StreamTokens

from ._sessions import Sessions

HERE = Path(__file__).parent
PREFIX = "/ui"
# What a figure not known (yet) reads as.
NONE = "\u2013"


@dataclass(frozen=True)
class DashboardSettings:
    # The operator's token (``BAC_ADMIN_TOKEN``); empty: only API keys sign in.
    admin_token: str
    # The server speaks HTTPS: cookies are ``Secure``.
    secure_cookies: bool
    max_body_bytes: int = 1 << 20
    # An upload through the file browser, at most (bytes).
    max_upload_bytes: int = 100 << 20
    session_idle_s: float = 2 * 3600.0
    session_max_s: float = 12 * 3600.0
    # Base domain of sandbox host names (``{port}-{id}.{domain}``), for links to ports.
    domain: str = "localhost"
    # Signs the desktop tab's stream tokens (the API's and the gateway's own instance).
    streams: StreamTokens = field(default_factory=StreamTokens)


def plane(request: HTTPConnection) -> ControlPlane:
    found: ControlPlane | None = request.app.state.plane
    if found is None:
        raise NotSupported("the server is starting")
    return found


def settings(request: HTTPConnection) -> DashboardSettings:
    found: DashboardSettings = request.app.state.settings
    return found


def sessions(request: HTTPConnection) -> Sessions:
    found: Sessions = request.app.state.sessions
    return found


def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(bytes=human_bytes, duration=human_duration, money=money,
                       when=when)
    env.globals["prefix"] = PREFIX
    return env


def render(request: Request, name: str, code: int = 200, /,
           **context: Any) -> HTMLResponse:
    """The page ``name`` answered with status ``code``."""
    env: Environment = request.app.state.jinja
    html = env.get_template(name).render(request=request, **context)
    return HTMLResponse(html, status_code=code)


def human_bytes(value: float | None) -> str:
    if value is None:
        return NONE
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def human_duration(seconds: float | None) -> str:
    if seconds is None:
        return NONE
    value = int(max(0.0, seconds))
    if value < 60:
        return f"{value}s"
    if value < 3600:
        return f"{value // 60}m {value % 60:02d}s"
    if value < 86400:
        return f"{value // 3600}h {value % 3600 // 60:02d}m"
    return f"{value // 86400}d {value % 86400 // 3600}h"


def money(value: float | None) -> str:
    if value is None:
        return NONE
    return f"{value:.4f}" if value < 1 else f"{value:.2f}"


def when(value: datetime | float | None) -> str:
    """A moment (a datetime, or unix seconds), in UTC."""
    if value is None or value == 0:
        return NONE
    moment = value if isinstance(value, datetime) else datetime.fromtimestamp(value, UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
