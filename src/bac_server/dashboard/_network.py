"""A sandbox's network on its page: the egress policy it runs under (edited in place),
its traffic counters and the log of where it went or was refused.

The tab reads the control plane's network service (which reads the backend's counters
and bounded logs); the edit replaces the policy exactly as ``PUT /sandboxes/{id}/network``
does, and the policy's own parser answers a bad entry with a 400 naming it.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from bac_server.control import (
    InvalidRequest,
    LiveSandbox,
    NetworkUpdate,
    NotSupported,
    SandboxState,
    Team,
)

from ._context import render
from ._guard import acting
from ._scope import Viewer

_MAX_ENTRIES = 500
_MAX_ENTRY = 256


def _lines(raw: object, name: str) -> list[str]:
    """A textarea's entries: one a line (commas also separate), blanks dropped."""
    if raw is None:
        return []
    if not isinstance(raw, str):
        raise InvalidRequest(f"{name} must be text")
    entries = [e.strip() for line in raw.splitlines() for e in line.split(",") if e.strip()]
    if len(entries) > _MAX_ENTRIES:
        raise InvalidRequest(f"{name} has more than {_MAX_ENTRIES} entries")
    for entry in entries:
        if len(entry) > _MAX_ENTRY:
            raise InvalidRequest(f"{name}: an entry is longer than {_MAX_ENTRY} characters")
    return entries


def policy_view(sbx: LiveSandbox) -> dict[str, Any]:
    """The policy as the form shows it."""
    network = sbx.network or {}

    def entries(key: str) -> list[str]:
        value = network.get(key)
        return [str(v) for v in value] if isinstance(value, list) else []

    return {"allow_out": entries("allowOut"), "deny_out": entries("denyOut"),
            "dns_servers": entries("dnsServers"),
            "internet": sbx.allow_internet_access is not False}


async def network_tab(view: Viewer, sbx: LiveSandbox, team: Team) -> dict[str, Any]:
    """What the tab shows: the policy, and while it runs its counters and log."""
    shown: dict[str, Any] = {"policy": policy_view(sbx), "usage": None, "unavailable": None}
    if sbx.state is not SandboxState.RUNNING:
        shown["unavailable"] = "counters and log are read while the sandbox runs"
        return shown
    try:
        _, shown["usage"] = await view.plane.network.usage(team, sbx.sandbox_id)
    except NotSupported as exc:
        shown["unavailable"] = str(exc)
    return shown


async def update(request: Request) -> Response:
    view, form = await acting(request)
    sid: str = request.path_params["sandbox_id"]
    sbx, team = view.sandbox(sid)
    await view.plane.network.update(team, sid, NetworkUpdate(
        allow_out=_lines(form.get("allow_out"), "allowed"),
        deny_out=_lines(form.get("deny_out"), "denied"),
        dns_servers=_lines(form.get("dns_servers"), "DNS servers"),
        allow_internet_access=form.get("internet") == "yes",
        # The form edits the lists only: the sandbox's header rules stay as they are.
        rules=(sbx.network or {}).get("rules")))
    return render(request, "_tab_network.html", sid=sid, live=sbx,
                  message="egress policy replaced", **await network_tab(view, sbx, team))
