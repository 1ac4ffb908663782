"""Artefacts (Bac's own, not part of E2B's API): a sandbox's file or directory promoted into
durable storage under a run id and a name (docs/volumes-secrets-artefacts.md).

* ``POST   /sandboxes/{id}/artefacts``    ``{"path", "name", "runId"}``: 201 ``Artefact``
  when new; 200 with the same ``Artefact`` when these bytes were promoted under that name
  before; 409 when other bytes were; 507 over the team's quota
* ``GET    /artefacts?runId=``            the run's artefacts, oldest first
* ``GET    /artefacts/{runId}/{name}``    the bytes (a directory's as a tar)
* ``DELETE /artefacts/{runId}/{name}``    204
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StrictStr
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api.body import Name, Strict, read_model
from bac_server.api.context import plane, sandbox_id, settings, team
from bac_server.api.errors import BadRequest
from bac_server.api.views import rfc3339, streamed_file
from bac_server.control import Artefacts, NotSupported
from bac_server.store import ArtefactKind, ArtefactRecord


class PromoteRequest(Strict):
    path: Annotated[StrictStr, Field(min_length=1, max_length=4096)]
    name: Name
    runId: Name


def artefact_view(rec: ArtefactRecord) -> dict[str, Any]:
    """``Artefact``."""
    return {"runId": rec.run_id, "name": rec.name, "sha256": rec.sha256,
            "sizeBytes": rec.size_bytes, "kind": rec.kind.value, "sandboxID": rec.sandbox_id,
            "path": rec.source_path, "createdAt": rfc3339(rec.created_at)}


def _artefacts(request: Request) -> Artefacts:
    found = plane(request).artefacts
    if found is None:
        raise NotSupported("this server keeps no artefacts")
    return found


def _key(request: Request) -> tuple[str, str]:
    return request.path_params["runId"], request.path_params["name"]


async def promote(request: Request) -> Response:
    caller = await team(request)
    body = await read_model(request, PromoteRequest, settings(request).max_body_bytes)
    done = await _artefacts(request).promote(caller, sandbox_id(request), path=body.path,
                                             name=body.name, run_id=body.runId)
    return JSONResponse(artefact_view(done.record), 201 if done.created else 200)


async def list_artefacts(request: Request) -> Response:
    caller = await team(request)
    run_id = request.query_params.get("runId")
    if not run_id:
        raise BadRequest("runId is required: the run whose artefacts to list")
    found = await _artefacts(request).listing(caller, run_id)
    return JSONResponse([artefact_view(a) for a in found])


async def download(request: Request) -> Response:
    caller = await team(request)
    record, handle = await _artefacts(request).open(caller, *_key(request))
    directory = record.kind is ArtefactKind.DIRECTORY
    filename = record.name + (".tar" if directory else "")
    headers = {"Content-Length": str(record.size_bytes),
               "Content-Disposition": f'attachment; filename="{filename}"',
               "ETag": f'"{record.sha256}"', "X-Bac-Artefact-Sha256": record.sha256,
               "X-Bac-Artefact-Kind": record.kind.value}
    return streamed_file(handle, headers=headers,
                         media_type="application/x-tar" if directory
                         else "application/octet-stream")



async def delete(request: Request) -> Response:
    caller = await team(request)
    await _artefacts(request).delete(caller, *_key(request))
    return Response(status_code=204)
