"""A sandbox's saved states: Bac's checkpoints, E2B's snapshots and forks.

Bac (not part of E2B's API):

* ``POST   /sandboxes/{id}/checkpoints``                 take one (201 ``Checkpoint``)
* ``GET    /sandboxes/{id}/checkpoints``                 the timeline, oldest first
* ``POST   /sandboxes/{id}/checkpoints/{cid}/restore``   roll back to it (200 ``Sandbox``)
* ``DELETE /sandboxes/{id}/checkpoints/{cid}``           204
* ``PUT    /sandboxes/{id}/checkpoints/schedule``        every N seconds, keep K (204)

E2B:

* ``POST   /sandboxes/{id}/snapshots``   201 ``SnapshotInfo`` (the sandbox keeps running)
* ``GET    /snapshots``                  ``[SnapshotInfo]``, newest first, ``X-Next-Token``
* ``POST   /sandboxes/{id}/fork``        201, one ``{"sandbox": Sandbox}`` or ``{"error":
  {"code", "message"}}`` per requested fork; the source keeps running

A snapshot id or name is accepted as ``templateID`` on create, and deleted by ``DELETE
/templates/{id}`` (:mod:`bac_server.api.templates`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from pydantic import StrictBool, StrictInt
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api import views
from bac_server.api.body import Name, Strict, read_model
from bac_server.api.context import plane, public_domain, sandbox_id, settings, team
from bac_server.api.errors import status_of
from bac_server.api.query import int_param, page_after
from bac_server.api.views import rfc3339
from bac_server.control import ControlError, LiveSandbox, Team
from bac_server.control.volumes import Volumes
from bac_server.store import CheckpointRecord


class SaveRequest(Strict):
    """``POST /sandboxes/{id}/checkpoints`` (Bac) and ``POST /sandboxes/{id}/snapshots``
    (E2B): the same two keys."""

    name: Name | None = None
    memory: StrictBool | None = None


class ScheduleRequest(Strict):
    """``PUT /sandboxes/{id}/checkpoints/schedule``: a null interval stops it."""

    intervalSeconds: StrictInt | None = None
    keep: StrictInt | None = None


class ForkRequest(Strict):
    timeout: StrictInt | None = None
    count: StrictInt | None = None


def _checkpoint(rec: CheckpointRecord) -> dict[str, Any]:
    """``Checkpoint``."""
    return {
        "checkpointID": rec.checkpoint_id,
        "sandboxID": rec.sandbox_id,
        "name": rec.name,
        "createdAt": rfc3339(rec.created_at),
        "sizeBytes": rec.size_bytes,
        "memory": rec.memory,
    }


def _snapshot(rec: CheckpointRecord) -> dict[str, Any]:
    """``SnapshotInfo``."""
    names = [rec.name] if rec.name else []
    return {"snapshotID": rec.checkpoint_id, "names": names, "sandboxID": rec.sandbox_id,
            "createdAt": rfc3339(rec.created_at), "sizeBytes": rec.size_bytes,
            "memory": rec.memory}


def _checkpoint_id(request: Request) -> str:
    value: str = request.path_params["checkpoint_id"]
    return value


class _Save(Protocol):
    def __call__(self, team: Team, sandbox_id: str, *, name: str | None,
                 memory: bool) -> Awaitable[CheckpointRecord]: ...


async def _save(request: Request, save: _Save,
                view: Callable[[CheckpointRecord], dict[str, Any]], *,
                snapshot: bool = False) -> Response:
    """A checkpoint and a snapshot are taken alike; they differ in what keeps them."""
    caller = await team(request)
    body = await read_model(request, SaveRequest, settings(request).max_body_bytes)
    volumes = plane(request).volumes
    if snapshot and volumes is not None:
        volumes.refuse_snapshot(caller, sandbox_id(request))
    rec = await save(caller, sandbox_id(request), name=body.name,
                     memory=body.memory is not False)
    return JSONResponse(view(rec), 201)


async def take_checkpoint(request: Request) -> Response:
    return await _save(request, plane(request).checkpoints.take, _checkpoint)


async def list_checkpoints(request: Request) -> Response:
    caller = await team(request)
    found = await plane(request).checkpoints.timeline(caller, sandbox_id(request))
    return JSONResponse([_checkpoint(c) for c in found])


async def restore_checkpoint(request: Request) -> Response:
    caller = await team(request)
    await read_model(request, SaveRequest, settings(request).max_body_bytes)
    sbx = await plane(request).checkpoints.restore(caller, sandbox_id(request),
                                                   _checkpoint_id(request))
    conf = settings(request)
    return JSONResponse(views.sandbox(sbx, envd_version=conf.envd_version,
                                      domain=public_domain(request)))


async def delete_checkpoint(request: Request) -> Response:
    caller = await team(request)
    await plane(request).checkpoints.delete(caller, sandbox_id(request), _checkpoint_id(request))
    return Response(status_code=204)


async def schedule_checkpoints(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, ScheduleRequest, settings(request).max_body_bytes)
    await plane(request).checkpoints.schedule(caller, sandbox_id(request),
                                              body.intervalSeconds, body.keep)
    return Response(status_code=204)


async def take_snapshot(request: Request) -> Response:
    return await _save(request, plane(request).snapshots.create, _snapshot, snapshot=True)


async def list_snapshots(request: Request) -> Response:
    caller = await team(request)
    query = request.query_params
    limit = int_param(query, "limit", default=100, low=1, high=100) or 100
    found = await plane(request).snapshots.listing(caller, sandbox_id=query.get("sandboxID"),
                                                   name=query.get("name"))
    page, headers = page_after(found, lambda s: s.checkpoint_id, query, limit)
    return JSONResponse([_snapshot(s) for s in page], headers=headers)


async def fork(request: Request) -> Response:
    caller = await team(request)
    conf = settings(request)
    body = await read_model(request, ForkRequest, conf.max_body_bytes)
    control = plane(request)
    results = await control.snapshots.fork(
        caller, sandbox_id(request), count=1 if body.count is None else body.count,
        timeout_s=body.timeout)
    if control.volumes is not None:
        # Each fork mounts its source's volumes; one that cannot is ended, an error item.
        results = [await _with_volumes(control.volumes, caller, r, sandbox_id(request))
                   for r in results]
    items = [
        {"sandbox": views.sandbox(r, envd_version=conf.envd_version, domain=public_domain(request))}
        if isinstance(r, LiveSandbox) else
        {"error": {"code": status_of(r), "message": str(r)}}
        for r in results
    ]
    return JSONResponse(items, 201)


async def _with_volumes(volumes: Volumes, caller: Team, made: LiveSandbox | ControlError,
                        source_id: str) -> LiveSandbox | ControlError:
    if not isinstance(made, LiveSandbox):
        return made
    try:
        await volumes.inherit(caller, made, source_id)
    except ControlError as exc:
        return exc
    return made
