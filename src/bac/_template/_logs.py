"""Reading a build's log: live from Bac's stream, or by polling E2B's status endpoint.

A Bac server streams a build's log lines as they are written
(``GET .../logs?follow=true``, one JSON ``BuildLogEntry`` a line, until the build ends).
A server without that stream (E2B's own answers its JSON page instead) is polled:
``GET .../status?logsOffset=N`` returns the lines after the N already seen, so offsets
count every line, whatever its level. The stream replays a build from its first line;
both ways a caller sees each line once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from urllib.parse import quote

from bac import _errors as e
from bac import _ndjson as ndjson
from bac._api import ApiClient, api_error
from bac._template._models import BuildLogEntry, BuildState

_FIRST_POLL, _MAX_POLL = 0.05, 0.5


def path_part(value: str) -> str:
    if not value:
        raise e.InvalidArgumentError("a template name or id must not be empty")
    return quote(value, safe="")


def build_path(template_id: str, build_id: str) -> str:
    return f"/templates/{path_part(template_id)}/builds/{path_part(build_id)}"


class NoStream(Exception):
    """The server does not stream build logs; poll instead."""


async def status(api: ApiClient, template_id: str, build_id: str, offset: int = 0,
                 limit: int = 100) -> BuildState:
    data = await api.json("GET", build_path(template_id, build_id) + "/status",
                          params={"logsOffset": str(offset), "limit": str(limit)})
    return BuildState.from_api(data)


async def poll(api: ApiClient, template_id: str, build_id: str, *, until_done: bool,
               offset: int = 0) -> AsyncIterator[BuildState]:
    """Build states with the lines after ``offset``; with ``until_done`` until the build
    has finished and its last lines are read, else up to the first empty page."""
    delay = _FIRST_POLL
    while True:
        state = await status(api, template_id, build_id, offset)
        offset += len(state.logs)
        yield state
        if state.logs:
            delay = _FIRST_POLL
            continue
        if state.status.finished or not until_done:
            return
        # E2B's API has no push for this: poll, backing off while the build is quiet.
        await asyncio.sleep(delay)
        delay = min(delay * 1.5, _MAX_POLL)


async def stream(api: ApiClient, template_id: str,
                 build_id: str) -> AsyncIterator[BuildLogEntry]:
    """Every line of the build, live, until it ends; :class:`NoStream` when the server
    cannot stream (checked before the first line)."""
    async with ndjson.opened(api.config, build_path(template_id, build_id) + "/logs",
                             {"follow": "true"}, "build log") as response:
        if response.status_code >= 300:
            await response.aread()
            if response.status_code in (400, 404, 405, 422):
                raise NoStream(response.status_code)
            raise api_error(response)
        if "ndjson" not in response.headers.get("content-type", ""):
            raise NoStream(response.headers.get("content-type"))
        async for value in ndjson.objects(response, "build log"):
            yield BuildLogEntry.from_api(value)


async def entries(api: ApiClient, template_id: str, build_id: str, *, follow: bool,
                  offset: int = 0) -> AsyncIterator[BuildLogEntry]:
    """The build's lines after ``offset``; with ``follow`` until the build ends."""
    seen = 0
    if follow:
        try:
            async for entry in stream(api, template_id, build_id):
                seen += 1
                if seen > offset:
                    yield entry
            return
        except (NoStream, e.ServerUnreachableError):
            pass  # poll from where the stream stopped
    async for state in poll(api, template_id, build_id, until_done=follow,
                            offset=max(offset, seen)):
        for entry in state.logs:
            yield entry


async def cancel(api: ApiClient, template_id: str, build_id: str) -> bool:
    """Ask the server to stop a build; False when it had already finished or the server
    cannot cancel builds."""
    try:
        await api.request("DELETE", build_path(template_id, build_id), ok=(200, 202, 204))
    except e.SandboxError as exc:
        if exc.status_code in (404, 405, 409):
            return False
        raise
    return True
