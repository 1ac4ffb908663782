"""The fleet's live feed: a Server-Sent Events stream telling a viewer's page that a
sandbox it may see changed (added, paused, resumed, ended), at once.

The stream carries no data of the sandboxes (the page fetches its rows again, through
the same scoping as any page): only that something changed. Another team's changes are
not even told. It ends when the session ends or the server stops (the plane closes its
feed), and says it is alive every ``_KEEPALIVE_S`` seconds so proxies keep it open.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ._context import sessions
from ._guard import viewer

_KEEPALIVE_S = 15.0


async def fleet_events(request: Request) -> Response:
    view = await viewer(request)
    table = sessions(request)

    async def stream() -> AsyncIterator[bytes]:
        yield b"retry: 1000\n\n"
        async with view.plane.feed.subscribe() as sub:
            while True:
                changes = await sub.wait(_KEEPALIVE_S)
                if sub.closed or not table.alive(view.session):
                    return
                seen = sum(1 for c in changes if view.sees_team(c.team_id))
                if seen:
                    yield f"event: change\ndata: {seen}\n\n".encode()
                elif not changes:
                    yield b": alive\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"X-Accel-Buffering": "no"})
