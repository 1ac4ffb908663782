"""Changes to sandboxes from the dashboard: pause, resume, extend and kill, on one sandbox
or many at once, and the operator's kill switch behind a confirmation.

Each sandbox named is found through the viewer's scope (:mod:`._scope`): another team's
is a 404 exactly as an unknown one is, and when none of those named is found the answer
is a 404. The control plane decides the rest (a paused sandbox cannot be paused again:
its 409 is reported beside the others' outcomes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from bac_server.control import (
    ControlError,
    InvalidRequest,
    SandboxNotFoundError,
    SandboxState,
    Selector,
    Team,
)

from ._context import render
from ._guard import acting
from ._scope import Viewer

_ACTIONS = ("pause", "resume", "extend", "kill")
_DONE = {"pause": "paused", "resume": "resumed", "extend": "extended", "kill": "killed"}
_AT_ONCE = 8
_MAX_IDS = 1000
_MAX_EXTEND_S = 7 * 86_400


@dataclass(frozen=True)
class Outcome:
    done: list[str]
    failed: dict[str, str]
    missing: list[str]


def _seconds(form: FormData) -> int:
    raw = form.get("seconds", "300")
    if not isinstance(raw, str) or not raw.strip().isdigit():
        raise InvalidRequest("seconds must be a whole number")
    value = int(raw.strip())
    if not 1 <= value <= _MAX_EXTEND_S:
        raise InvalidRequest(f"seconds must be 1 to {_MAX_EXTEND_S}")
    return value


def _step(view: Viewer, action: str, seconds: int) -> Callable[[str, Team], Awaitable[None]]:
    lifecycle = view.plane.lifecycle
    if action == "pause":
        return lambda sid, team: lifecycle.pause(team, sid)
    if action == "resume":
        return lambda sid, team: lifecycle.resume(team, sid, None)
    if action == "extend":
        return lambda sid, team: lifecycle.refresh(team, sid, seconds)
    return lambda sid, team: lifecycle.kill(team, sid)


async def apply(view: Viewer, action: str, ids: list[str], seconds: int = 300) -> Outcome:
    """``action`` on each sandbox of ``ids`` the viewer may see, a few at a time."""
    if action not in _ACTIONS:
        raise InvalidRequest(f"action must be one of {', '.join(_ACTIONS)}")
    step = _step(view, action, seconds)
    gate = asyncio.Semaphore(_AT_ONCE)
    done: list[str] = []
    failed: dict[str, str] = {}
    missing: list[str] = []

    async def one(sid: str) -> None:
        async with gate:
            try:
                _, team = view.sandbox(sid)
                await step(sid, team)
                done.append(sid)
            except SandboxNotFoundError:
                missing.append(sid)
            except ControlError as exc:
                failed[sid] = str(exc)

    await asyncio.gather(*(one(sid) for sid in ids))
    return Outcome(sorted(done), failed, sorted(missing))


def _ids(form: FormData) -> list[str]:
    ids = list(dict.fromkeys(v for v in form.getlist("ids") if isinstance(v, str) and v))
    if not ids:
        raise InvalidRequest("select at least one sandbox")
    if len(ids) > _MAX_IDS:
        raise InvalidRequest(f"at most {_MAX_IDS} sandboxes at once")
    return ids


def answer(request: Request, action: str, outcome: Outcome) -> Response:
    if outcome.missing and not outcome.done and not outcome.failed:
        raise SandboxNotFoundError(outcome.missing[0])
    parts = [f"{_DONE[action]} {len(outcome.done)}"]
    if outcome.failed:
        parts.append("failed: " + "; ".join(f"{k}: {v}" for k, v in outcome.failed.items()))
    if outcome.missing:
        parts.append("not found: " + ", ".join(outcome.missing))
    kind = "error" if outcome.failed or outcome.missing else "ok"
    return render(request, "_flash.html", kind=kind, message=" · ".join(parts))


async def fleet_actions(request: Request) -> Response:
    view, form = await acting(request)
    action = form.get("action")
    if not isinstance(action, str) or action not in _ACTIONS:
        raise InvalidRequest(f"action must be one of {', '.join(_ACTIONS)}")
    seconds = _seconds(form) if action == "extend" else 300
    return answer(request, action, await apply(view, action, _ids(form), seconds))


async def sandbox_action(request: Request) -> Response:
    """One sandbox's button on its page: the same actions."""
    view, form = await acting(request)
    action: str = request.path_params["action"]
    sid: str = request.path_params["sandbox_id"]
    view.sandbox(sid)  # 404 before anything else
    seconds = _seconds(form) if action == "extend" else 300
    return answer(request, action, await apply(view, action, [sid], seconds))


_SWITCH = ("pause", "kill", "release")


async def kill_switch(request: Request) -> Response:
    """The operator's kill switch: the first post asks for confirmation (how many
    sandboxes it would touch), the second, with ``confirm``, acts."""
    view, form = await acting(request, operator=True)
    action = form.get("action")
    if not isinstance(action, str) or action not in _SWITCH:
        raise InvalidRequest(f"action must be one of {', '.join(_SWITCH)}")
    raw = form.get("team", "")
    team = raw.strip() if isinstance(raw, str) else ""
    if len(team) > 256:
        raise InvalidRequest("team is too long")
    selector = Selector(everything=not team, team=team or None)
    if form.get("confirm") != "yes":
        states = {"pause": (SandboxState.RUNNING,),
                  "kill": (SandboxState.RUNNING, SandboxState.PAUSED),
                  "release": (SandboxState.PAUSED,)}[action]
        count = sum(1 for s in view.plane.registry.all()
                    if s.state in states and selector.matches(s))
        return render(request, "_switch_confirm.html", action=action, team=team, count=count,
                      view=view)
    switch = view.plane.kill_switch
    run = {"pause": switch.pause, "kill": switch.kill, "release": switch.release}[action]
    result = await run(selector)
    message = f"kill switch: {result.action} {len(result.sandbox_ids)}"
    if result.failed:
        message += " · failed: " + "; ".join(f"{k}: {v}" for k, v in result.failed.items())
    return render(request, "_flash.html", kind="error" if result.failed else "ok",
                  message=message)
