"""E2B's volumes: the team's volumes under ``X-API-KEY``, and each volume's content under
its own bearer token (docs/volumes-secrets-artefacts.md, *Volumes*).

* ``POST   /volumes``             ``{"name"}``: 201 ``{"volumeID","name","token","domain"}``; 409 a
  name the team has; 400 past the team's volume quota
* ``GET    /volumes``             ``[{"volumeID","name"}]``, oldest first
* ``GET    /volumes/{volumeID}``  ``{"volumeID","name","token","domain"}``
* ``DELETE /volumes/{volumeID}``  204; 409 while a sandbox that has not ended mounts it

The content API, ``Authorization: Bearer <the volume's token>`` (401 otherwise, the same
for an unknown volume), query ``path`` (absolute in the volume), owners as the
sandboxes' ids. Its errors are ``{"code": "<string>", "message"}`` (E2B's volume API
shape, the ``code`` a word: ``bad_request``, ``unauthorized``, ``not_found``,
``conflict``, ``insufficient_storage``):

* ``GET    /volumecontent/{id}/file``  the bytes; ``PUT`` writes them (body, streamed;
  ``uid``, ``gid``, ``mode``; missing parents made; replaces the file whole): 201 stat
* ``GET    /volumecontent/{id}/dir``   ``[VolumeEntryStat]`` (``depth``, default 1);
  ``POST`` makes one (``uid``, ``gid``, ``mode``, ``force``: parents too, and one there
  already is fine): 201 stat
* ``GET    /volumecontent/{id}/path``  stat; ``PATCH`` ``{"uid","gid","mode"}``: 200
  stat; ``DELETE``: 204 (a directory with everything in it)
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import Field, StrictInt
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bac_server.api.body import Name, Strict, read_model
from bac_server.api.context import plane, public_domain, settings, team
from bac_server.api.errors import ApiError, BadRequest, status_of
from bac_server.api.query import int_param
from bac_server.api.views import rfc3339, streamed_file
from bac_server.control import ControlError, NotSupported
from bac_server.control.volumes import (
    EntryStat,
    Relayed,
    VolumeContent,
    Volumes,
    content_at,
    failure,
)
from bac_server.store import StoreUnavailable, VolumeRecord

_CHUNK = 1 << 20
_Id = Field(default=None, ge=0, le=65535)
_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
          409: "conflict", 413: "payload_too_large", 501: "not_implemented",
          503: "unavailable", 507: "insufficient_storage"}


class NewVolume(Strict):
    name: Name


class MetadataUpdate(Strict):
    uid: StrictInt | None = _Id
    gid: StrictInt | None = _Id
    mode: StrictInt | None = Field(default=None, ge=0, le=0o7777)


def _volumes(request: Request) -> Volumes:
    found = plane(request).volumes
    if found is None:
        raise NotSupported("this server keeps no volumes")
    return found


def _with_token(request: Request, rec: VolumeRecord) -> dict[str, Any]:
    """``VolumeAndToken``. ``domain`` is this server's: an SDK not told
    ``E2B_VOLUME_API_URL`` then sends the content calls, and the volume's token, to
    ``https://api.<this domain>``, never to E2B's own ``api.e2b.app``."""
    return {"volumeID": rec.volume_id, "name": rec.name, "token": rec.token,
            "domain": public_domain(request)}


def _volume_id(request: Request) -> str:
    value: str = request.path_params["volumeID"]
    return value


# -- /volumes ------------------------------------------------------------------------------

async def create_volume(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, NewVolume, settings(request).max_body_bytes)
    return JSONResponse(_with_token(request, await _volumes(request).create(caller, body.name)),
                        201)


async def list_volumes(request: Request) -> Response:
    caller = await team(request)
    found = await _volumes(request).listing(caller)
    return JSONResponse([{"volumeID": v.volume_id, "name": v.name} for v in found])


async def get_volume(request: Request) -> Response:
    caller = await team(request)
    found = await _volumes(request).get(caller, _volume_id(request))
    return JSONResponse(_with_token(request, found))


async def delete_volume(request: Request) -> Response:
    caller = await team(request)
    await _volumes(request).destroy(caller, _volume_id(request))
    return Response(status_code=204)


# -- /volumecontent ------------------------------------------------------------------------

Handler = Callable[[Request, VolumeContent], Awaitable[Response]]


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"code": _CODES.get(status, "error"), "message": message}, status,
                        headers={"Should-Retry": "false"})


ContentOf = Callable[[Request], Awaitable[VolumeContent | Relayed]]


def content_route(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """The volume's token checked, its content handed to ``handler`` (or the request
    relayed to the machine keeping the volume); every failure in the volume API's error
    shape (a string ``code``)."""

    async def authorized(request: Request) -> VolumeContent | Relayed:
        return await _volumes(request).authorize(
            _volume_id(request), request.headers.get("authorization"))

    return functools.wraps(handler)(_guarded(handler, authorized))


def _guarded(handler: Handler, content_of: ContentOf
             ) -> Callable[[Request], Awaitable[Response]]:
    async def route(request: Request) -> Response:
        try:
            content = await content_of(request)
            if isinstance(content, Relayed):
                return await _relay(request, content)
            return await handler(request, content)
        except ApiError as exc:
            return _error(exc.status, exc.message)
        except ControlError as exc:
            return _error(status_of(exc), str(exc))
        except StoreUnavailable:
            return _error(503, "the server's database is unavailable; try again later")
        except OSError as exc:  # file work the content module did not name: still a 4xx
            err = failure(exc)
            return _error(status_of(err) if isinstance(err, ControlError) else 400,
                          str(err))

    return route


async def _relay(request: Request, relayed: Relayed) -> Response:
    """The request as the machine keeping the volume answers it, streamed both ways."""
    answer = await relayed.send(
        request.method, request.url.path.rsplit("/", 1)[-1],
        request.url.query,
        [(k, v) for k, v in request.headers.items() if k.lower() == "content-type"],
        request.stream())
    return StreamingResponse(answer.body, status_code=answer.status,
                             headers=dict(answer.headers),
                             background=BackgroundTask(answer.close))


def served_routes(prefix: str, directory_of: Callable[[str], Awaitable[Path]]
                  ) -> list[Route]:
    """The content API for the machine that keeps the volumes (``bac node``), under
    ``prefix``: the same handlers, the volume's content at ``directory_of(volume id)``;
    whoever calls has been let in already (the node's token)."""

    async def local(request: Request) -> VolumeContent:
        return content_at(await directory_of(_volume_id(request)))

    return [Route(f"{prefix}/{{volumeID}}/{sub}", _guarded(handler, local),
                  methods=[method])
            for sub, method, handler in _HANDLERS]


def _path(request: Request) -> str:
    path = request.query_params.get("path")
    if path is None:
        raise BadRequest("path is required")
    return path


def _ids(request: Request) -> dict[str, int | None]:
    q = request.query_params
    return {"uid": int_param(q, "uid", default=None, low=0, high=65535),
            "gid": int_param(q, "gid", default=None, low=0, high=65535),
            "mode": int_param(q, "mode", default=None, low=0, high=0o7777)}


def _flag(request: Request, name: str) -> bool:
    raw = request.query_params.get(name, "false").lower()
    if raw not in ("true", "false", "1", "0", ""):
        raise BadRequest(f"{name} must be true or false, got {raw[:20]!r}")
    return raw in ("true", "1")


def entry_view(entry: EntryStat) -> dict[str, Any]:
    """``VolumeEntryStat``."""
    body: dict[str, Any] = {
        "name": entry.name, "type": entry.type, "path": entry.path, "size": entry.size,
        "mode": entry.mode, "uid": entry.uid, "gid": entry.gid,
        "atime": rfc3339(entry.atime), "mtime": rfc3339(entry.mtime),
        "ctime": rfc3339(entry.ctime)}
    if entry.target is not None:
        body["target"] = entry.target
    return body


async def _read_file(request: Request, content: VolumeContent) -> Response:
    fd, _ = await asyncio.to_thread(content.open_read, _path(request))
    handle = os.fdopen(fd, "rb", buffering=0)
    # No Content-Length: a sandbox may be writing the file meanwhile, and the answer is
    # what is there until its end.
    return streamed_file(handle, media_type="application/octet-stream")



async def _write_file(request: Request, content: VolumeContent) -> Response:
    path = _path(request)
    _flag(request, "force")  # checked; a write replaces the file either way
    upload = await asyncio.to_thread(lambda: content.open_write(path, **_ids(request)))
    try:
        pending: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            pending.append(chunk)
            size += len(chunk)
            if size >= _CHUNK:
                data = b"".join(pending)
                pending, size = [], 0
                await asyncio.to_thread(upload.write, data)
        if pending:
            await asyncio.to_thread(upload.write, b"".join(pending))
        entry = await asyncio.to_thread(upload.publish)
    except BaseException:
        await asyncio.to_thread(upload.discard)
        raise
    return JSONResponse(entry_view(entry), 201)


async def _list_dir(request: Request, content: VolumeContent) -> Response:
    depth = int_param(request.query_params, "depth", default=1, low=1, high=64) or 1
    found = await asyncio.to_thread(content.listing, _path(request), depth)
    return JSONResponse([entry_view(e) for e in found])


async def _make_dir(request: Request, content: VolumeContent) -> Response:
    path, ids, force = _path(request), _ids(request), _flag(request, "force")
    entry = await asyncio.to_thread(lambda: content.make_dir(path, force=force, **ids))
    return JSONResponse(entry_view(entry), 201)


async def _stat_path(request: Request, content: VolumeContent) -> Response:
    return JSONResponse(entry_view(await asyncio.to_thread(content.stat, _path(request))))


async def _update_path(request: Request, content: VolumeContent) -> Response:
    path = _path(request)
    body = await read_model(request, MetadataUpdate, settings(request).max_body_bytes)
    entry = await asyncio.to_thread(lambda: content.update(
        path, uid=body.uid, gid=body.gid, mode=body.mode))
    return JSONResponse(entry_view(entry))


async def _remove_path(request: Request, content: VolumeContent) -> Response:
    await asyncio.to_thread(content.remove, _path(request))
    return Response(status_code=204)





# The content API's handlers by path and method: the API's routes (each behind the
# volume's token) and a node's (``served_routes``).
_HANDLERS: tuple[tuple[str, str, Handler], ...] = (
    ("file", "GET", _read_file), ("file", "PUT", _write_file),
    ("dir", "GET", _list_dir), ("dir", "POST", _make_dir),
    ("path", "GET", _stat_path), ("path", "PATCH", _update_path),
    ("path", "DELETE", _remove_path))
read_file = content_route(_read_file)
write_file = content_route(_write_file)
list_dir = content_route(_list_dir)
make_dir = content_route(_make_dir)
stat_path = content_route(_stat_path)
update_path = content_route(_update_path)
remove_path = content_route(_remove_path)
