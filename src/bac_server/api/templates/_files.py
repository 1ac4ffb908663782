"""The build-context upload cache the official SDK uses before a build.

* ``GET /templates/{id}/files/{hash}``  201 ``{"present": true}`` when the team already
  uploaded these files, else ``{"present": false, "url": ...}``: an absolute URL on this
  server (from the request's own scheme and host) with a short-lived signed token
* ``PUT /templates/{id}/files/{hash}?token=...``  the tar, streamed to disk; no API key (the
  SDK sends none there): the token is the credential. 201 ``{"present": true}``
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api.context import team, template_ref, templates
from bac_server.api.errors import BadRequest, PayloadTooLarge
from bac_server.control import NotFound
from bac_server.control.templates import UploadTooLarge, check_hash


def _hash(request: Request) -> str:
    value: str = request.path_params["hash"]
    return check_hash(value)


async def upload_link(request: Request) -> Response:
    caller = await team(request)
    files_hash = _hash(request)
    services = templates(request)
    template = await services.catalog.owned(caller, template_ref(request))
    if await services.uploads.path(caller.team_id, files_hash) is not None:
        return JSONResponse({"present": True}, 201)
    token = services.uploads.sign(template.template_id, files_hash)
    base = str(request.base_url).rstrip("/")
    url = (f"{base}/templates/{quote(template.template_id, safe='')}/files/{files_hash}"
           f"?token={quote(token, safe='')}")
    return JSONResponse({"present": False, "url": url}, 201)


async def upload_files(request: Request) -> Response:
    files_hash = _hash(request)
    template_id = template_ref(request)
    services = templates(request)
    # SECURITY: the signed token (not an API key) authorises exactly this template + hash.
    services.uploads.verify(template_id, files_hash, request.query_params.get("token"))
    template = await services.catalog.by_id(template_id)
    if template is None:
        raise NotFound(f"template {template_id!r} not found")
    declared = request.headers.get("content-length")
    if declared is not None and not declared.isdigit():
        raise BadRequest("Content-Length must be a non-negative integer")
    try:
        await services.uploads.receive(template.team_id, files_hash, request.stream(),
                                       None if declared is None else int(declared))
    except UploadTooLarge as exc:
        raise PayloadTooLarge(str(exc)) from exc
    return JSONResponse({"present": True}, 201)
