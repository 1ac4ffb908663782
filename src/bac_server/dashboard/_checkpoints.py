"""A sandbox's checkpoints from its page: take one, roll the sandbox back to one, and fork
the sandbox into a new one at its present state.

Each answers with the checkpoints tab drawn again with what happened above it, so the
timeline shows the change at once. The control plane decides and words every refusal (a
paused sandbox cannot be checkpointed, a checkpoint of another sandbox is a 404, the
team's checkpoint quota).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from bac_server.control import ControlError, InvalidRequest, LiveSandbox, Team

from ._context import PREFIX, human_bytes, render
from ._guard import acting
from ._scope import Viewer

_MAX_NAME = 64


def _name(raw: object) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise InvalidRequest("name must be text")
    name = raw.strip()
    if len(name) > _MAX_NAME:
        raise InvalidRequest(f"name is longer than {_MAX_NAME} characters")
    return name or None


async def _tab(request: Request, view: Viewer, sid: str, team: Team, message: str,
               link: str | None = None) -> Response:
    checkpoints = await view.plane.checkpoints.timeline(team, sid)
    return render(request, "_tab_checkpoints.html", sid=sid, checkpoints=checkpoints,
                  live=True, message=message, link=link)


async def take(request: Request) -> Response:
    view, form = await acting(request)
    sid: str = request.path_params["sandbox_id"]
    _, team = view.sandbox(sid)
    memory = form.get("memory", "yes") != "no"
    record = await view.plane.checkpoints.take(team, sid, name=_name(form.get("name")),
                                               memory=memory)
    what = "with its memory" if record.memory else "files only"
    return await _tab(request, view, sid, team,
                      f"checkpoint {record.checkpoint_id} taken ({what}, "
                      f"{human_bytes(record.size_bytes)})")


async def restore(request: Request) -> Response:
    view, _ = await acting(request)
    sid: str = request.path_params["sandbox_id"]
    checkpoint_id: str = request.path_params["checkpoint_id"]
    _, team = view.sandbox(sid)
    await view.plane.checkpoints.restore(team, sid, checkpoint_id)
    return await _tab(request, view, sid, team,
                      f"rolled back to checkpoint {checkpoint_id}: the sandbox runs from there")


async def fork(request: Request) -> Response:
    view, _ = await acting(request)
    sid: str = request.path_params["sandbox_id"]
    _, team = view.sandbox(sid)
    [made] = await view.plane.snapshots.fork(team, sid, count=1, timeout_s=None)
    if isinstance(made, ControlError):
        raise made
    assert isinstance(made, LiveSandbox)
    if view.plane.volumes is not None:
        await view.plane.volumes.inherit(team, made, sid)  # as the API's fork
    return await _tab(request, view, sid, team, f"forked into {made.sandbox_id}",
                      link=f"{PREFIX}/sandboxes/{made.sandbox_id}")
