"""``AsyncFleet``: the operator's kill switch, over the server's admin routes.

::

    async with AsyncFleet() as fleet:                   # BAC_ADMIN_TOKEN / BAC_API_URL
        done = await fleet.pause(metadata={"run_id": "r-42"})
        print(done.count, "frozen in", done.frozen_ms, "ms")

It authenticates with the operator's token (``admin_token=`` or ``BAC_ADMIN_TOKEN``, sent
as a bearer token), never a team's API key. A selector is ``all=True`` or any of ``team``,
``metadata`` and ``template`` (all must match); none is an ``InvalidArgumentError`` before
any request.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from bac import _errors as e
from bac._api import api_error
from bac._config import ConnectionConfig, http_client
from bac._version import USER_AGENT


@dataclass(frozen=True)
class FleetResult:
    """What a switch did: the sandboxes it acted on, those it could not (id: why), how
    long freezing them took, and their pause (``disk``, written in the background;
    ``freezer`` where the server cannot save memory; None for a kill or a release)."""

    action: str
    sandbox_ids: list[str]
    failed: dict[str, str]
    frozen_ms: float
    mode: str | None
    raw: dict[str, Any] = field(repr=False)

    @property
    def count(self) -> int:
        return len(self.sandbox_ids)

    @classmethod
    def from_api(cls, body: Any) -> FleetResult:
        try:
            return cls(action=str(body["action"]), sandbox_ids=[str(i) for i in
                                                               body["sandboxIDs"]],
                       failed={str(f["sandboxID"]): str(f["message"]) for f in body["failed"]},
                       frozen_ms=float(body["frozenMs"]), mode=body.get("mode"), raw=body)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise e.ServerError(f"the server sent a bad kill switch answer: {exc}") from exc


class AsyncFleet:
    """Pause, kill or release every sandbox a selector matches, on any team."""

    def __init__(self, *, admin_token: str | None = None, api_url: str | None = None,
                 request_timeout: float | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        environ = os.environ if env is None else env
        config = ConnectionConfig.resolve(api_url=api_url, request_timeout=request_timeout,
                                          env=environ)
        token = admin_token or environ.get("BAC_ADMIN_TOKEN")
        if not token:
            raise e.AuthenticationError("no admin token: pass admin_token=, or set "
                                        "BAC_ADMIN_TOKEN (the server's own)")
        self._url = config.api_url
        self._http = http_client(
            base_url=config.api_url, timeout=httpx.Timeout(config.request_timeout),
            headers={"Authorization": f"Bearer {token}", "User-Agent": USER_AGENT})

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncFleet:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def pause(self, *, all: bool = False, team: str | None = None,
                    metadata: Mapping[str, str] | None = None,
                    template: str | None = None) -> FleetResult:
        """Freeze the matching running sandboxes at once and hold them paused; the server
        writes them to disk with their memory afterwards."""
        return await self._switch("pause", all, team, metadata, template)

    async def kill(self, *, all: bool = False, team: str | None = None,
                   metadata: Mapping[str, str] | None = None,
                   template: str | None = None) -> FleetResult:
        """Freeze the matching running sandboxes at once; the server ends every matching
        one (running or paused) afterwards."""
        return await self._switch("kill", all, team, metadata, template)

    async def release(self, *, all: bool = False, team: str | None = None,
                      metadata: Mapping[str, str] | None = None,
                      template: str | None = None) -> FleetResult:
        """Let the matching sandboxes a pause holds be resumed again (they stay paused)."""
        return await self._switch("release", all, team, metadata, template)

    async def _switch(self, action: str, everything: bool, team: str | None,
                      metadata: Mapping[str, str] | None, template: str | None) -> FleetResult:
        filtered = team is not None or bool(metadata) or template is not None
        if everything == filtered:
            raise e.InvalidArgumentError("select with all=True or with team, metadata or "
                                         "template (not both)")
        body: dict[str, Any] = {"all": True} if everything else {
            k: v for k, v in (("team", team), ("metadata", dict(metadata or {})),
                              ("template", template)) if v}
        try:
            response = await self._http.post(f"/admin/fleet/{action}", json=body)
        except httpx.TimeoutException as exc:
            raise e.TimeoutError(f"the kill switch's {action} timed out") from exc
        except httpx.TransportError as exc:
            raise e.ServerUnreachableError(
                f"cannot reach the Bac API at {self._url}: {exc}") from exc
        if response.status_code != 200:
            raise api_error(response)
        try:
            answer = response.json()
        except ValueError as exc:
            raise e.ServerError("the kill switch answered with a non-JSON body") from exc
        return FleetResult.from_api(answer)
