"""Listing sandboxes one page at a time (``GET /v2/sandboxes`` + ``X-Next-Token``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal
from urllib.parse import quote, urlencode

from bac._api import ApiClient
from bac._config import ConnectionConfig
from bac._errors import InvalidArgumentError, ServerError
from bac._models import SandboxInfo, SandboxQuery

Order = Literal["asc", "desc"]
MAX_PAGE = 100


def metadata_filter(metadata: dict[str, str]) -> str:
    """The ``metadata`` query value: a query string inside a query parameter.

    Keys and values are percent-encoded before being joined, and the whole string is
    encoded again as a parameter value, exactly as E2B's SDK does, so one server-side
    decoding rule serves both SDKs.
    """
    return urlencode({quote(k): quote(v) for k, v in metadata.items()})


def list_params(
    query: SandboxQuery | None,
    limit: int | None,
    next_token: str | None,
    order: Order | None,
) -> dict[str, str]:
    """Query parameters for one page; only what the caller set is sent."""
    params: dict[str, str] = {}
    if query is not None:
        if query.metadata:
            params["metadata"] = metadata_filter(query.metadata)
        if query.state:
            params["state"] = ",".join(s.value for s in query.state)
        if query.template:
            params["template"] = query.template
        if query.started_after is not None:
            params["startedAfter"] = query.started_after.astimezone().isoformat()
    if order is not None:
        if order not in ("asc", "desc"):
            raise InvalidArgumentError(f"order must be 'asc' or 'desc', got {order!r}")
        params["order"] = order
    if limit is not None:
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidArgumentError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
        params["limit"] = str(limit)
    if next_token:
        params["nextToken"] = next_token
    return params


class AsyncSandboxPaginator:
    """Pages of sandboxes; ``has_next`` is true until the server stops sending a token.

    ::

        paginator = AsyncSandbox.list(query=SandboxQuery(metadata={"job": "42"}))
        while paginator.has_next:
            for info in await paginator.next_items():
                print(info.sandbox_id)
    """

    def __init__(
        self,
        config: ConnectionConfig,
        query: SandboxQuery | None = None,
        limit: int | None = None,
        next_token: str | None = None,
        order: Order | None = None,
    ) -> None:
        list_params(query, limit, next_token, order)  # fail on bad input now, not later
        self._config = config
        self.query = query
        self.limit = limit
        self.order = order
        self._next_token = next_token
        self._has_next = True

    @property
    def has_next(self) -> bool:
        """Whether :meth:`next_items` would return another page."""
        return self._has_next

    @property
    def next_token(self) -> str | None:
        """Cursor of the next page (pass it to a new paginator to resume)."""
        return self._next_token

    async def next_items(self) -> list[SandboxInfo]:
        """Fetch the next page."""
        if not self._has_next:
            raise InvalidArgumentError("no more pages: check has_next before next_items()")
        params = list_params(self.query, self.limit, self._next_token, self.order)
        async with ApiClient(self._config) as api:
            response = await api.request("GET", "/v2/sandboxes", params=params)
        token = response.headers.get("x-next-token") or None
        self._next_token = token
        self._has_next = token is not None
        try:
            body = response.json()
        except ValueError as exc:
            raise ServerError("GET /v2/sandboxes: the server sent a non-JSON body") from exc
        if not isinstance(body, list):
            raise ServerError("GET /v2/sandboxes: the server did not send a list")
        return [SandboxInfo.from_api(item) for item in body]

    async def all(self) -> AsyncIterator[SandboxInfo]:
        """Every remaining sandbox, fetching pages as needed."""
        while self._has_next:
            for info in await self.next_items():
                yield info
