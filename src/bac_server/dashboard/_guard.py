"""Who may see a page and make a change: the session, the CSRF check, the security headers,
and the error pages.

Error tree (dashboard)::

    DashboardError
    ├── SignInRequired   no live session: a page redirects to sign-in, a fetch gets 401
    └── Refused          403: a change without the session's CSRF token, or from another
                         origin; an operator-only action by a team

Every answer carries a strict Content-Security-Policy (scripts and styles from this
server only, nothing inline, no frames, forms posting here only; the terminal's page
alone allows inline styles, which xterm.js writes), and is never cached. A
change (any method but GET and HEAD) must carry the session's CSRF token, in the
``X-CSRF-Token`` header (what htmx and the page's scripts send) or a ``csrf`` form field,
and, when the browser says where it comes from (``Origin``), come from this server.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Mapping
from urllib.parse import urlsplit

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import HTTPConnection, Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bac_server.control import (
    CapReached,
    Conflict,
    ControlError,
    InvalidRequest,
    NotFound,
    NotSupported,
    QuotaExceeded,
    TeamLimitExceeded,
    Unauthenticated,
)

from ._context import PREFIX, plane, render, sessions, settings
from ._scope import Viewer
from ._sessions import COOKIE, Session

log = logging.getLogger(__name__)

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "font-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
       "base-uri 'none'")
# The terminal's page only: xterm.js sizes and colours its rows with <style> elements it
# writes at run time (contents not known ahead, so no hash can allow them); scripts stay
# as strict as everywhere else.
TERMINAL_CSP = CSP.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
_SAFE = ("GET", "HEAD")


class DashboardError(Exception):
    pass


class SignInRequired(DashboardError):
    pass


class Refused(DashboardError):
    pass


class SecurityHeaders:
    """Pure ASGI (so streams pass untouched): the headers above on every answer."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []),
                                      *(h for h in _HEADERS if h[0] not in names)]
            await send(message)

        await self._app(scope, receive, with_headers)


def _session(conn: HTTPConnection) -> Session:
    session = sessions(conn).find(conn.cookies.get(COOKIE))
    if session is None:
        raise SignInRequired("sign in first")
    return session


async def viewer(conn: HTTPConnection) -> Viewer:
    """The signed-in viewer; its API key is checked again (a revoked key signs out)."""
    session = _session(conn)
    principal = session.principal
    control = plane(conn)
    if principal.api_key is not None:
        try:
            await control.keys.authenticate(principal.api_key)
        except Unauthenticated:
            sessions(conn).close(conn.cookies.get(COOKIE))
            raise SignInRequired("the API key was revoked: sign in again") from None
    elif not settings(conn).admin_token:
        raise SignInRequired("operator sign-in is off")
    return Viewer(principal, session, control)


def same_origin(conn: HTTPConnection) -> bool:
    """Whether the ``Origin`` the browser sent (if any) is this server's own."""
    origin = conn.headers.get("origin")
    if origin is None:
        return True
    parts = urlsplit(origin)
    return parts.netloc != "" and parts.netloc == conn.headers.get("host", "")


def token_matches(expected: str, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(expected.encode(), (given or "").encode())


async def acting(request: Request, *, operator: bool = False, max_files: int = 0,
                 max_body_bytes: int | None = None) -> tuple[Viewer, FormData]:
    """A change: the viewer, its form (bounded), checked for the session's CSRF token and
    this server's origin; ``operator``: only the operator may make it; ``max_files``:
    files the form may carry (an upload's)."""
    found = await viewer(request)
    if request.method in _SAFE:
        raise Refused("a change must be a POST")
    if not same_origin(request):
        raise Refused("this change comes from another site")
    length = request.headers.get("content-length")
    bound = settings(request).max_body_bytes if max_body_bytes is None else max_body_bytes
    if length is not None and (not length.isdigit() or int(length) > bound):
        raise Refused("the request is too large")
    form = await request.form(max_files=max_files, max_fields=2000)
    given = request.headers.get("x-csrf-token")
    if given is None:
        field = form.get("csrf")
        given = field if isinstance(field, str) else None
    if not token_matches(found.csrf, given):
        raise Refused("the CSRF token is missing or wrong: reload the page")
    if operator and not found.operator:
        raise Refused("only the operator may do this")
    return found, form


def _htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


_STATUS: list[tuple[type[ControlError], int]] = [
    (InvalidRequest, 400), (Unauthenticated, 401), (NotFound, 404), (Conflict, 409),
    (CapReached, 403), (TeamLimitExceeded, 429), (QuotaExceeded, 507), (NotSupported, 501),
]


def _error_page(request: Request, status: int, message: str) -> Response:
    if _htmx(request):
        # The flash area shows it (htmx is configured to swap error answers).
        response = render(request, "_flash.html", status, kind="error", message=message)
        response.headers.update({"HX-Retarget": "#flash", "HX-Reswap": "innerHTML"})
        return response
    return render(request, "error.html", status, status=status, message=message)


async def on_sign_in_required(request: Request, exc: Exception) -> Response:
    if request.method in _SAFE and not _htmx(request) \
            and "text/html" in request.headers.get("accept", ""):
        return RedirectResponse(f"{PREFIX}/signin", 303)
    response = PlainTextResponse(str(exc), 401)
    response.headers["HX-Redirect"] = f"{PREFIX}/signin"
    return response


async def on_refused(request: Request, exc: Exception) -> Response:
    return _error_page(request, 403, str(exc))


async def on_control_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ControlError)
    status = next((code for cls, code in _STATUS if isinstance(exc, cls)), 500)
    if status == 500:
        log.error("dashboard: %s on %s %s", exc, request.method, request.url.path)
    return _error_page(request, status, str(exc))


async def on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error_page(request, exc.status_code, exc.detail)


async def on_unexpected(request: Request, exc: Exception) -> Response:
    log.exception("dashboard: unhandled error on %s %s", request.method, request.url.path,
                  exc_info=exc)
    return _error_page(request, 500, "internal error (logged on the server)")


HANDLERS: Mapping[type[Exception] | int, object] = {
    SignInRequired: on_sign_in_required,
    Refused: on_refused,
    ControlError: on_control_error,
    HTTPException: on_http_error,
    Exception: on_unexpected,
}
