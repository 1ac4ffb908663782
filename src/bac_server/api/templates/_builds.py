"""Builds of a template: start, status with logs, logs (also live), cancel.

* ``POST   /v2/templates/{id}/builds/{buildID}``         202: the steps; the build is queued
* ``GET    /templates/{id}/builds/{buildID}/status``     ``TemplateBuildInfo``; query
  ``logsOffset`` (lines already seen), ``limit`` (≤ 100, the SDK's page), ``level`` (lowest)
* ``GET    /templates/{id}/builds/{buildID}/logs``       ``{"logs": [BuildLogEntry]}``; query
  ``cursor`` (unix ms), ``limit``, ``direction``, ``level``; Bac: ``follow=true`` streams
  every line as NDJSON (one ``BuildLogEntry`` per line) until the build ends
* ``DELETE /templates/{id}/builds/{buildID}``            Bac: cancel (status error, "cancelled")

A build's body as an item of ``TemplateWithBuilds`` (:func:`build_body`) is here too.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from bac_server.api.body import read_model
from bac_server.api.context import build_ref, settings, team, template_ref, templates
from bac_server.api.query import choice_param, epoch_param, int_param
from bac_server.api.views import rfc3339
from bac_server.control import Limits
from bac_server.store import BuildLogRecord, BuildRecord

from ._recipe import TemplateBuildStart, to_recipe

_LEVELS = ("debug", "info", "warn", "error")
_MAX_PAGE = 100
_REASON_LINES = 20


def build_body(b: BuildRecord, *, limits: Limits, envd_version: str) -> dict[str, Any]:
    """``TemplateBuild`` (an item of ``TemplateWithBuilds.builds``)."""
    body: dict[str, Any] = {
        "buildID": b.build_id, "status": b.status, "createdAt": rfc3339(b.created_at),
        "updatedAt": rfc3339(b.updated_at),
        "cpuCount": b.cpu_count or limits.default_cpu_count,
        "memoryMB": b.memory_mb or limits.default_memory_mb,
        "diskSizeMB": b.disk_mb or limits.default_disk_mb, "envdVersion": envd_version,
        "tags": list(b.tags),
    }
    if b.finished_at is not None:
        body["finishedAt"] = rfc3339(b.finished_at)
    if b.reason is not None:
        body["reason"] = reason_body(b)
    return body


def _log_entry(e: BuildLogRecord) -> dict[str, Any]:
    """``BuildLogEntry``."""
    body: dict[str, Any] = {"timestamp": rfc3339(e.at), "message": e.message, "level": e.level}
    if e.step is not None:
        body["step"] = e.step
    return body


def reason_body(b: BuildRecord, entries: list[BuildLogRecord] | None = None) -> dict[str, Any]:
    """``BuildStatusReason``: why the build failed, in which step, with its last lines."""
    body: dict[str, Any] = {"message": b.reason or "build failed"}
    if b.reason_step is not None:
        body["step"] = b.reason_step
    if entries:
        body["logEntries"] = [_log_entry(e) for e in entries]
    return body


def _status_body(b: BuildRecord, entries: list[BuildLogRecord],
                 last: list[BuildLogRecord]) -> dict[str, Any]:
    """``TemplateBuildInfo``: status, a page of log lines, and the reason once failed."""
    body: dict[str, Any] = {
        "templateID": b.template_id, "buildID": b.build_id, "status": b.status,
        "logEntries": [_log_entry(e) for e in entries],
        "logs": [f"{rfc3339(e.at)} {e.message}" for e in entries],
    }
    if b.status == "error":
        body["reason"] = reason_body(b, last)
    return body


def _levels(request: Request) -> list[str] | None:
    level = choice_param(request.query_params, "level", _LEVELS)
    return None if level is None else list(_LEVELS[_LEVELS.index(level):])


async def start_build(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, TemplateBuildStart, settings(request).max_body_bytes)
    recipe = to_recipe(body)
    await templates(request).builds.trigger(caller, template_ref(request), build_ref(request),
                                            recipe)
    return Response(status_code=202)


async def build_status(request: Request) -> Response:
    caller = await team(request)
    query = request.query_params
    offset = int_param(query, "logsOffset", default=0, low=0, high=1 << 31) or 0
    limit = int_param(query, "limit", default=_MAX_PAGE, low=0, high=_MAX_PAGE)
    levels = _levels(request)
    services = templates(request)
    _template, build = await services.catalog.build_of(caller, template_ref(request),
                                                       build_ref(request))
    # The build was read first: a finished build's lines are all in the store already.
    entries = await services.catalog.logs(build.build_id, offset=offset,
                                          limit=_MAX_PAGE if limit is None else limit,
                                          levels=levels)
    last = []
    if build.status == "error":
        last = await services.catalog.logs(build.build_id, limit=_REASON_LINES,
                                           newest_first=True)
    return JSONResponse(_status_body(build, entries, last[::-1]))


async def build_logs(request: Request) -> Response:
    caller = await team(request)
    query = request.query_params
    follow = choice_param(query, "follow", ("true", "false")) == "true"
    limit = int_param(query, "limit", default=_MAX_PAGE, low=0, high=_MAX_PAGE)
    backward = choice_param(query, "direction", ("forward", "backward")) == "backward"
    choice_param(query, "source", ("temporary", "persistent"))  # both are the same log here
    since = epoch_param(query, "cursor", millis=True)
    levels = _levels(request)
    services = templates(request)
    _template, build = await services.catalog.build_of(caller, template_ref(request),
                                                       build_ref(request))
    if follow:
        return StreamingResponse(_follow(request, build.build_id, levels),
                                 media_type="application/x-ndjson",
                                 headers={"Cache-Control": "no-store"})
    entries = await services.catalog.logs(build.build_id, since=since, levels=levels,
                                          limit=_MAX_PAGE if limit is None else limit,
                                          newest_first=backward)
    return JSONResponse({"logs": [_log_entry(e) for e in entries]})


async def _follow(request: Request, build_id: str,
                  levels: list[str] | None) -> AsyncIterator[bytes]:
    async for entry in templates(request).builds.follow(build_id, levels=levels):
        yield json.dumps(_log_entry(entry)).encode() + b"\n"


async def cancel_build(request: Request) -> Response:
    caller = await team(request)
    await templates(request).builds.cancel(caller, template_ref(request), build_ref(request))
    return Response(status_code=204)
