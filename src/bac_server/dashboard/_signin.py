"""Sign-in and sign-out.

Sign in with a team's API key (that team's sandboxes) or the operator's token
(``BAC_ADMIN_TOKEN``: every team), typed into a form posted to the server: never in a URL.
The sign-in form has no session yet, so its CSRF check is a double submit: a random value
in a cookie of its own and in the form, which another site can neither read nor set. The
session cookie is HttpOnly, SameSite=Strict, scoped to the dashboard's path, and Secure
when the server speaks HTTPS; a sign-in always starts a new session (no fixation).
"""

from __future__ import annotations

import hmac
import secrets

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from bac_server.control import Unauthenticated

from ._context import PREFIX, plane, render, sessions, settings
from ._guard import Refused, acting, same_origin, token_matches
from ._sessions import COOKIE, Principal

_SIGNIN_COOKIE = "bac_signin"
_MAX_CREDENTIAL = 512


def _cookie(response: Response, request: Request, name: str, value: str,
            max_age: int | None = None) -> None:
    response.set_cookie(name, value, max_age=max_age, path=PREFIX, httponly=True,
                        samesite="strict", secure=settings(request).secure_cookies)


def _form(request: Request, status: int = 200, error: str | None = None) -> Response:
    token = secrets.token_urlsafe(24)
    response = render(request, "signin.html", status, csrf=token, error=error,
                      operator_on=bool(settings(request).admin_token))
    _cookie(response, request, _SIGNIN_COOKIE, token, max_age=3600)
    return response


async def signin_page(request: Request) -> Response:
    return _form(request)


async def signin(request: Request) -> Response:
    if not same_origin(request):
        raise Refused("this sign-in comes from another site")
    form = await request.form(max_files=0, max_fields=10)
    given = form.get("csrf")
    if not token_matches(request.cookies.get(_SIGNIN_COOKIE, ""),
                         given if isinstance(given, str) else None):
        raise Refused("the sign-in form expired: reload the page")
    raw = form.get("credential")
    credential = raw.strip() if isinstance(raw, str) else ""
    if not credential or len(credential) > _MAX_CREDENTIAL:
        return _form(request, 400, "enter an API key or the operator token")
    admin = settings(request).admin_token
    if admin and hmac.compare_digest(credential.encode(), admin.encode()):
        principal = Principal(team=None, label="operator")
    else:
        try:
            team = await plane(request).keys.authenticate(credential)
        except Unauthenticated:
            return _form(request, 401, "this is not a valid API key or operator token")
        principal = Principal(team=team, label=f"team {team.name}", api_key=credential)
    cookie, _ = sessions(request).open(principal)
    response = RedirectResponse(f"{PREFIX}/", 303)
    _cookie(response, request, COOKIE, cookie)
    response.delete_cookie(_SIGNIN_COOKIE, path=PREFIX)
    return response


async def signout(request: Request) -> Response:
    await acting(request)
    sessions(request).close(request.cookies.get(COOKIE))
    response = RedirectResponse(f"{PREFIX}/signin", 303)
    response.headers["HX-Redirect"] = f"{PREFIX}/signin"
    response.delete_cookie(COOKIE, path=PREFIX, httponly=True, samesite="strict",
                           secure=settings(request).secure_cookies)
    return response
