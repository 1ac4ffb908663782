"""Request-context helpers shared by the Connect services (imported with the RPC stack)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from connectrpc.code import Code
from connectrpc.errors import ConnectError

from bac_envd._errors import InvalidPath, UnknownUser
from bac_envd._paths import resolve_path
from bac_envd._state import EnvdState
from bac_envd._users import User, basic_auth_username, select_user

if TYPE_CHECKING:
    from connectrpc.request import RequestContext

    # Every handler's context: these helpers read only its headers and deadline.
    Context = RequestContext[Any, Any]

DEFAULT_KEEPALIVE_SECONDS = 90.0


def rpc_user(ctx: Context, state: EnvdState) -> User:
    """The user selected by ``Authorization: Basic`` or the default user."""
    try:
        requested = basic_auth_username(ctx.request_headers.get("authorization"))
        return select_user(requested, state.default_user)
    except UnknownUser as exc:
        raise ConnectError(Code.UNAUTHENTICATED, str(exc)) from exc


def rpc_path(path: str, user: User, state: EnvdState) -> str:
    try:
        return resolve_path(path, user, state.default_workdir)
    except InvalidPath as exc:
        raise ConnectError(Code.INVALID_ARGUMENT, str(exc)) from exc


def keepalive_seconds(ctx: Context) -> float:
    raw = ctx.request_headers.get("keepalive-ping-interval")
    try:
        value = float(raw) if raw else DEFAULT_KEEPALIVE_SECONDS
    except ValueError:
        return DEFAULT_KEEPALIVE_SECONDS
    return value if value > 0 else DEFAULT_KEEPALIVE_SECONDS


def deadline_seconds(ctx: Context) -> float | None:
    """Seconds left of the client's ``Connect-Timeout-Ms``, None when unlimited."""
    remaining: float | None = ctx.timeout_ms
    # "0" means no deadline to E2B clients; connectrpc would read it as already expired.
    if remaining is None or ctx.request_headers.get("connect-timeout-ms", "").strip() == "0":
        return None
    return max(0.0, remaining / 1000.0)


def error(code: Code, message: str) -> ConnectError:
    return ConnectError(code, message)
