"""The sandbox resource: its request bodies, its response bodies and its routes.

* ``POST   /sandboxes``, ``/v2/sandboxes``      create: 201 ``Sandbox``
* ``GET    /v2/sandboxes``                      filters, order, ``limit`` + ``X-Next-Token``
  pagination; ``GET /sandboxes`` (v1): every running sandbox of the team, metadata filter only
* ``GET    /sandboxes/{id}``                    200 ``SandboxDetail``; 404 for an unknown,
  ended or foreign one
* ``DELETE /sandboxes/{id}``                    204 once every resource is released
* ``POST   /sandboxes/{id}/timeout``            set the end, may shorten; 0 ends now (204)
* ``POST   /sandboxes/{id}/refreshes``          keep-alive: extend only (204)
* ``POST   /sandboxes/{id}/connect``, ``/v2/...``  a running sandbox gets its end pushed out
  (never pulled in) and answers 200; a paused one is resumed and answers 201 (``"memory":
  false`` — E2B ``on_resume="reboot"`` — starts it afresh on its files instead of restoring
  its memory)
* ``POST   /sandboxes/{id}/resume``             the older spelling of that second case; its
  ``autoPause`` sets what the next timeout does
* ``POST   /sandboxes/{id}/pause``              204; 409 when already paused. ``{"memory":
  false}`` (E2B ``mode="filesystem"``) keeps the files only; otherwise the whole state is
  saved (``control.sandboxes._pausing`` says which pause that is on this host)
* ``GET    /sandboxes/{id}/logs``, ``/v2/...``  the event log (created, started, timeout
  changes, connect, kill, timeout, ...), also after the sandbox ended
* ``GET    /sandboxes/{id}/metrics``            samples in ``[start, end]`` (unix seconds);
  ``GET /sandboxes/metrics?sandbox_ids=a,b`` the latest sample of each

``cpuCount`` and ``memoryMB`` on create are Bac extensions. One module for the whole resource,
past 400 lines: its bodies, views and routes are read together (the views and the routes that
answer them side by side); the list query's grammar (:mod:`bac_server.api.list_query`) is a
concept apart, tested alone. A sandbox's network is in
:mod:`bac_server.api.network`, its checkpoints, snapshots and forks in
:mod:`bac_server.api.checkpoints`; the ``Sandbox`` body they answer too in
:mod:`bac_server.api.views`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal

from pydantic import StrictBool, StrictFloat, StrictInt, StrictStr
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api import views
from bac_server.api.body import Name, Open, Strict, read_model
from bac_server.api.caps import CostCapBody, caps_of
from bac_server.api.context import plane, public_domain, sandbox_id, settings, team
from bac_server.api.errors import BadRequest
from bac_server.api.list_query import parse_list_query
from bac_server.api.network import NetworkConfig, refuse_unsupported_network
from bac_server.api.query import choice_param, epoch_param, int_param
from bac_server.api.views import rfc3339
from bac_server.control import (
    CreateRequest,
    IdlePolicy,
    InvalidRequest,
    ListQuery,
    LiveSandbox,
    NotFound,
    NotSupported,
    OnTimeout,
    PauseKind,
    SandboxState,
    Team,
    egress_policy,
    page,
)
from bac_server.control.volumes import Mount
from bac_server.store import EventRecord, MetricRecord

_LEVELS = ("debug", "info", "warn", "error")
_MAX_LOG_LINES = 10_000
_MAX_METRIC_IDS = 100


# Request bodies.

class AutoResume(Strict):
    enabled: StrictBool


class IdleBody(Strict):
    """Bac's idle policy (each field optional: the server's default)."""

    after: StrictInt | None = None
    cpuBelowPct: StrictInt | StrictFloat | None = None
    action: Literal["pause", "kill"] | None = None


class VolumeMount(Strict):
    name: StrictStr
    path: StrictStr


class NewSandbox(Strict):
    templateID: Name
    timeout: StrictInt | None = None
    autoPause: StrictBool | None = None
    autoPauseMemory: StrictBool | None = None
    autoResume: AutoResume | None = None
    secure: StrictBool | None = None
    allow_internet_access: StrictBool | None = None
    network: NetworkConfig | None = None
    metadata: dict[StrictStr, StrictStr] | None = None
    envVars: dict[StrictStr, StrictStr] | None = None
    mcp: dict[str, Any] | None = None
    iam: Open | None = None
    volumeMounts: list[VolumeMount] | None = None
    cpuCount: StrictInt | None = None
    memoryMB: StrictInt | None = None
    idle: IdleBody | None = None
    costCap: CostCapBody | None = None


class ConnectSandbox(Strict):
    timeout: StrictInt | None = None
    memory: StrictBool | None = None


class ConnectSandboxV1(Strict):
    timeout: StrictInt
    memory: StrictBool | None = None


class TimeoutRequest(Strict):
    timeout: StrictInt


class RefreshRequest(Strict):
    duration: StrictInt | None = None


class PauseRequest(Strict):
    memory: StrictBool | None = None
    requireHealthyGuest: StrictBool | None = None


class ResumeRequest(Strict):
    timeout: StrictInt | None = None
    autoPause: StrictBool | None = None
    memory: StrictBool | None = None


# Response bodies (every key the SDK's generated models require is always present).

def _listed(sbx: LiveSandbox, *, envd_version: str,
            mounts: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    """``ListedSandbox``: one item of a listing; ``mounts``: its volumes' (name, path)."""
    body: dict[str, Any] = {
        "templateID": sbx.template_id,
        "sandboxID": sbx.sandbox_id,
        "clientID": views.CLIENT_ID,
        "startedAt": rfc3339(sbx.started_at),
        "endAt": rfc3339(sbx.end_at),
        "envdVersion": envd_version,
        "cpuCount": sbx.cpu_count,
        "memoryMB": sbx.memory_mb,
        "diskSizeMB": sbx.disk_mb,
        "state": sbx.state.value,
        # Bac's own: whether its envd answers (control/sandboxes/_health.py); E2B's
        # ``state`` stays running or paused, the values its SDKs parse.
        "health": sbx.health.value,
        "metadata": dict(sbx.metadata),
        "volumeMounts": [{"name": name, "path": path} for name, path in mounts or ()],
    }
    if sbx.alias is not None:
        body["alias"] = sbx.alias
    return body


def _detail(sbx: LiveSandbox, *, envd_version: str, domain: str,
            mounts: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    """``SandboxDetail``: the answer to get."""
    body = _listed(sbx, envd_version=envd_version, mounts=mounts)
    body.update(
        {
            "envdAccessToken": sbx.envd_access_token,
            "allowInternetAccess": sbx.allow_internet_access,
            "domain": domain,
            "network": dict(sbx.network or {}),
            "lifecycle": {"autoResume": sbx.auto_resume, "onTimeout": sbx.on_timeout.value},
        }
    )
    if sbx.traffic_access_token is not None:
        body["trafficAccessToken"] = sbx.traffic_access_token
    if sbx.paused_as is not None:
        body["pauseMode"] = "filesystem" if sbx.paused_as is PauseKind.FILESYSTEM else "full"
    return body


def _metric(sample: MetricRecord) -> dict[str, Any]:
    return {
        "timestamp": rfc3339(sample.at),
        "timestampUnix": int(sample.at.timestamp()),
        "cpuCount": sample.cpu_count,
        "cpuUsedPct": sample.cpu_used_pct,
        "memUsed": sample.mem_used,
        "memTotal": sample.mem_total,
        "memCache": sample.mem_cache,
        "diskUsed": sample.disk_used,
        "diskTotal": sample.disk_total,
    }


def _log_entry(ev: EventRecord) -> dict[str, Any]:
    return {
        "timestamp": rfc3339(ev.at),
        "message": ev.message,
        "level": _level(ev.level),
        # E2B's entries hold text only: a trace report's numbers and flags as JSON text.
        "fields": {k: v if isinstance(v, str) else json.dumps(v) for k, v in ev.fields.items()},
    }


def _log_line(ev: EventRecord) -> dict[str, Any]:
    """E2B's log line: a JSON object as text (what ``e2b sandbox logs`` parses), its
    ``level`` and ``logger`` first, then the message and the event's fields."""
    body = {"level": _level(ev.level), "logger": _logger(ev.kind), "msg": ev.message,
            "event": ev.kind, **{k: v for k, v in ev.fields.items() if k != "kind"}}
    return {"timestamp": rfc3339(ev.at), "line": json.dumps(body, separators=(",", ":"))}


def _logger(kind: str) -> str:
    """The part of the sandbox that logged it, in E2B's words (``processSvc``, ...)."""
    return {"process": "processSvc", "transfer": "filesystemSvc"}.get(kind, "lifecycle")


def _level(value: str) -> str:
    return value if value in _LEVELS else "info"


# Routes.

def _on_timeout(auto_pause: bool | None) -> OnTimeout:
    """E2B's ``autoPause``: pause at the timeout instead of ending."""
    return OnTimeout.PAUSE if auto_pause else OnTimeout.KILL


def _mcp_refusal(servers: dict[str, Any]) -> str:
    """Why E2B's in-sandbox MCP gateway (``Sandbox.create(mcp=...)``) is refused, naming
    what is missing: E2B's SDK starts its ``mcp-gateway`` program in the ``mcp-gateway``
    template, which runs each server from its image in Docker's MCP catalog; Bac has
    neither the program nor a registry of those images (docs/agents.md)."""
    names = ", ".join(sorted(servers)[:5]) + (", ..." if len(servers) > 5 else "")
    return (f"mcp: the MCP gateway cannot start {names or 'any server'} here: it needs "
            "E2B's mcp-gateway program (the 'mcp-gateway' template, serving port 50005) "
            "and the servers' images from Docker's MCP catalog, and this server has "
            "neither. Start an MCP server yourself in the sandbox (an npm or PyPI one, "
            "with commands.run), or give the agent Bac's own MCP server: `bac mcp` or "
            "this server's /mcp endpoint (docs/agents.md)")


def _create_request(body: NewSandbox) -> CreateRequest:
    """Turn the wire body into the domain request, refusing what this server cannot honour."""
    if body.mcp is not None:
        raise InvalidRequest(_mcp_refusal(body.mcp))
    if body.iam is not None and (body.iam.model_extra or {}).get("tokens"):
        raise InvalidRequest("iam: identity tokens are not supported by this server yet")
    network = body.network
    if network is not None:
        refuse_unsupported_network(network.model_dump(exclude_none=True), "network")
    egress = egress_policy(
        None if network is None else network.allowOut,
        None if network is None else network.denyOut,
        None if network is None else network.dnsServers,
        body.allow_internet_access,
        rules=None if network is None else network.rules,
    )
    allow_public = True if network is None or network.allowPublicTraffic is None else (
        network.allowPublicTraffic
    )
    return CreateRequest(
        template=body.templateID,
        timeout_s=body.timeout,
        metadata=dict(body.metadata or {}),
        env_vars=dict(body.envVars or {}),
        cpu_count=body.cpuCount,
        memory_mb=body.memoryMB,
        allow_public_traffic=allow_public,
        network=None if network is None else network.model_dump(exclude_none=True),
        allow_internet_access=body.allow_internet_access,
        on_timeout=_on_timeout(body.autoPause),
        pause_memory=body.autoPauseMemory is not False,
        auto_resume=None if body.autoResume is None else body.autoResume.enabled,
        idle=_idle_policy(body.idle),
        egress=egress,
    )


def _idle_policy(body: IdleBody | None) -> IdlePolicy:
    if body is None:
        return IdlePolicy()
    return IdlePolicy(
        after_s=body.after,
        cpu_pct=None if body.cpuBelowPct is None else float(body.cpuBelowPct),
        action=None if body.action is None else OnTimeout(body.action),
    )


async def create_sandbox(request: Request) -> Response:
    caller = await team(request)
    conf = settings(request)
    body = await read_model(request, NewSandbox, conf.max_body_bytes)
    control = plane(request)
    caps = control.caps
    if caps is not None:
        caps.admit(caller, dict(body.metadata or {}))
    elif body.costCap is not None:
        caps_of(request)  # the server's NotSupported, before anything is made
    request_ = _create_request(body)
    mounts: list[Mount] = []
    if body.volumeMounts:
        volumes = control.volumes
        if volumes is None:
            raise NotSupported("volumeMounts: this server keeps no volumes")
        # Checked before anything is made: the team's volumes, at paths they may take.
        mounts = await volumes.check_mounts(
            caller, [(m.name, m.path) for m in body.volumeMounts])
        request_ = dataclasses.replace(
            request_, volumes=tuple(m.volume.volume_id for m in mounts))
    sbx = await control.creator.create(caller, request_)
    if mounts and control.volumes is not None:
        await control.volumes.attach(caller, sbx, mounts)
    if body.costCap is not None and caps is not None:
        try:
            await caps.create(caller, scope="sandbox", limit=body.costCap.limit,
                              action=body.costCap.action or "pause",
                              sandbox_id=sbx.sandbox_id)
        except BaseException:
            # Fails closed: no sandbox without the cap it was asked with.
            await control.lifecycle.kill(caller, sbx.sandbox_id)
            raise
    return JSONResponse(
        views.sandbox(sbx, envd_version=conf.envd_version, domain=public_domain(request)), 201
    )


async def list_v2(request: Request) -> Response:
    caller = await team(request)
    query = parse_list_query(request.query_params, paginated=True)
    items, next_token = page(plane(request).registry.visible(caller), query)
    version = settings(request).envd_version
    headers = {"X-Next-Token": next_token} if next_token else {}
    return JSONResponse([_listed(s, envd_version=version, mounts=_mounts(request, s))
                         for s in items], headers=headers)


async def list_v1(request: Request) -> Response:
    caller = await team(request)
    parsed = parse_list_query(request.query_params, paginated=False)
    query = ListQuery(metadata=parsed.metadata, states=frozenset({SandboxState.RUNNING}),
                      limit=10**9)
    items, _ = page(plane(request).registry.visible(caller), query)
    version = settings(request).envd_version
    return JSONResponse([_listed(s, envd_version=version, mounts=_mounts(request, s))
                         for s in items])


async def get_sandbox(request: Request) -> Response:
    caller = await team(request)
    conf = settings(request)
    sbx = plane(request).registry.owned(caller, sandbox_id(request))
    return JSONResponse(_detail(sbx, envd_version=conf.envd_version,
                                domain=public_domain(request), mounts=_mounts(request, sbx)))


def _mounts(request: Request, sbx: LiveSandbox) -> list[tuple[str, str]]:
    volumes = plane(request).volumes
    return [] if volumes is None else volumes.mounts_of(sbx.sandbox_id)


async def kill_sandbox(request: Request) -> Response:
    caller = await team(request)
    await plane(request).lifecycle.kill(caller, sandbox_id(request))
    return Response(status_code=204)


async def set_timeout(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, TimeoutRequest, settings(request).max_body_bytes)
    await plane(request).lifecycle.set_timeout(caller, sandbox_id(request), body.timeout)
    return Response(status_code=204)


async def refresh(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, RefreshRequest, settings(request).max_body_bytes)
    await plane(request).lifecycle.refresh(caller, sandbox_id(request), body.duration)
    return Response(status_code=204)


async def _connect(request: Request, caller: Team, timeout_s: int | None,
                   memory: bool | None) -> Response:
    conf = settings(request)
    control = plane(request)
    sid = sandbox_id(request)
    resumed = await control.lifecycle.connect(caller, sid, timeout_s, memory=memory is not False)
    sbx = control.registry.owned(caller, sid)
    return JSONResponse(
        views.sandbox(sbx, envd_version=conf.envd_version, domain=public_domain(request)),
        201 if resumed else 200,
    )


async def connect_v2(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, ConnectSandbox, settings(request).max_body_bytes)
    return await _connect(request, caller, body.timeout, body.memory)


async def connect_v1(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, ConnectSandboxV1, settings(request).max_body_bytes)
    return await _connect(request, caller, body.timeout, body.memory)


async def resume(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, ResumeRequest, settings(request).max_body_bytes)
    conf = settings(request)
    control = plane(request)
    sid = sandbox_id(request)
    on_timeout = None if body.autoPause is None else _on_timeout(body.autoPause)
    await control.lifecycle.resume(caller, sid, body.timeout, memory=body.memory is not False,
                                   on_timeout=on_timeout)
    sbx = control.registry.owned(caller, sid)
    return JSONResponse(
        views.sandbox(sbx, envd_version=conf.envd_version, domain=public_domain(request)), 201
    )


async def pause_sandbox(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, PauseRequest, settings(request).max_body_bytes)
    await plane(request).lifecycle.pause(caller, sandbox_id(request),
                                         memory=body.memory is not False)
    return Response(status_code=204)


async def logs_v1(request: Request) -> Response:
    caller = await team(request)
    params = request.query_params
    since = epoch_param(params, "start", millis=True)
    limit = int_param(params, "limit", default=1000, low=0, high=_MAX_LOG_LINES) or 0
    events = await plane(request).history.events(
        caller, sandbox_id(request), since=since, limit=limit
    )
    return JSONResponse(
        {
            "logs": [_log_line(e) for e in events],
            "logEntries": [_log_entry(e) for e in events],
        }
    )


async def logs_v2(request: Request) -> Response:
    caller = await team(request)
    params = request.query_params
    since = epoch_param(params, "cursor", millis=True)
    limit = int_param(params, "limit", default=1000, low=0, high=_MAX_LOG_LINES) or 0
    backward = choice_param(params, "direction", ("forward", "backward")) == "backward"
    level = choice_param(params, "level", _LEVELS)
    search = params.get("search") or None
    events = await plane(request).history.events(
        caller, sandbox_id(request), since=None if backward else since, limit=_MAX_LOG_LINES,
        newest_first=backward,
    )
    if backward and since is not None:
        events = [e for e in events if e.at <= since]
    if level is not None:
        floor = _LEVELS.index(level)
        events = [e for e in events if _LEVELS.index(_level(e.level)) >= floor]
    if search is not None:
        events = [e for e in events if search in e.message]
    return JSONResponse({"logs": [_log_entry(e) for e in events[:limit]]})


async def sandbox_metrics(request: Request) -> Response:
    caller = await team(request)
    start = epoch_param(request.query_params, "start")
    end = epoch_param(request.query_params, "end")
    if start is not None and end is not None and start > end:
        raise BadRequest("start must not be after end")
    samples = await plane(request).history.metrics(caller, sandbox_id(request), start, end)
    return JSONResponse([_metric(s) for s in samples])


async def many_metrics(request: Request) -> Response:
    caller = await team(request)
    raw = request.query_params.get("sandbox_ids", "")
    ids = [i for i in raw.split(",") if i]
    if not ids:
        raise BadRequest("sandbox_ids is required: a comma-separated list of sandbox ids")
    if len(ids) > _MAX_METRIC_IDS:
        raise BadRequest(f"sandbox_ids lists {len(ids)} ids, the limit is {_MAX_METRIC_IDS}")
    found: dict[str, Any] = {}
    for sid in ids:
        try:
            samples = await plane(request).history.metrics(caller, sid, None, None)
        except NotFound:
            continue
        if samples:
            found[sid] = _metric(samples[-1])
    return JSONResponse({"sandboxes": found})
