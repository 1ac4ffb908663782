"""A desktop sandbox's screen from Bac's SDK: a screenshot, and the live viewer's URL.

For sandboxes of the ``desktop`` template (docs/desktop.md), whose X display ``:0`` runs
from the start. ``stream`` starts the stream inside when it is not running (x11vnc on the
display, noVNC's websockify on port 6080: ``bac_protocol.desktop``) and asks the server
for a viewer URL carrying a short-lived stream token for this sandbox and port
(``POST /sandboxes/{id}/streams``): no password ever travels in a URL.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime

from bac import _errors as e
from bac._api import ApiClient
from bac._envd import AsyncCommands, AsyncFilesystem
from bac._lifecycle import sandbox_path
from bac._portal import PORTAL
from bac_protocol.desktop import (
    DISPLAY,
    NO_DESKTOP,
    START_BOUND_S,
    START_STREAM,
    STREAM_PORT,
)


@dataclass(frozen=True)
class DesktopStream:
    """Where to watch the desktop: ``url`` opens noVNC through the server's gateway and
    works until ``expires_at`` (a stream already open outlives it)."""

    url: str
    token: str
    port: int
    expires_at: datetime


class AsyncDesktop:
    """``sandbox.desktop``: the screen of a desktop sandbox."""

    def __init__(self, api: ApiClient, sandbox_id: str, commands: AsyncCommands,
                 files: AsyncFilesystem) -> None:
        self._api = api
        self._sandbox_id = sandbox_id
        self._commands = commands
        self._files = files

    async def screenshot(self) -> bytes:
        """The whole screen as PNG bytes."""
        path = f"/tmp/bac-screenshot-{secrets.token_hex(8)}.png"  # noqa: S108 - in the sandbox
        taken = await self._commands.run(
            f"scrot --pointer --overwrite {path}", envs={"DISPLAY": DISPLAY}, timeout=30)
        if taken.exit_code != 0:  # pragma: no cover - run() raises on a non-zero exit
            raise e.SandboxError(f"screenshot failed: {taken.stderr.strip()}")
        try:
            return await self._files.read(path, format="bytes")
        finally:
            await self._files.remove(path)

    async def stream(self, ttl: int | None = None) -> DesktopStream:
        """Start the stream inside unless it runs, and a viewer URL valid ``ttl`` seconds
        (the server's default and bound when None)."""
        try:
            await self._commands.run(START_STREAM, timeout=START_BOUND_S + 15)
        except e.CommandExitError as exc:
            if exc.exit_code == NO_DESKTOP:
                raise e.InvalidArgumentError(
                    f"sandbox {self._sandbox_id} has no desktop (create it from the "
                    "desktop template)") from exc
            raise e.SandboxError(f"the desktop stream did not start: {exc}") from exc
        body: dict[str, int] = {"port": STREAM_PORT}
        if ttl is not None:
            body["ttl"] = ttl
        answer = await self._api.json("POST", sandbox_path(self._sandbox_id, "/streams"),
                                      json=body, ok=(201,), not_found=e.SandboxNotFoundError)
        return DesktopStream(url=str(answer["url"]), token=str(answer["token"]),
                             port=int(answer["port"]),
                             expires_at=datetime.fromisoformat(str(answer["expiresAt"])))


class Desktop:
    """Blocking twin of :class:`AsyncDesktop` (``Sandbox.desktop``)."""

    def __init__(self, inner: AsyncDesktop) -> None:
        self._inner = inner

    def screenshot(self) -> bytes:
        """The whole screen as PNG bytes."""
        return PORTAL.run(self._inner.screenshot())

    def stream(self, ttl: int | None = None) -> DesktopStream:
        """See :meth:`AsyncDesktop.stream`."""
        return PORTAL.run(self._inner.stream(ttl))
