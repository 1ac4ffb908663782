"""A sandbox's trace, its E2B log and its resource samples, read from the REST API.

The trace is Bac's view of everything a sandbox did: its lifecycle, each process envd ran
in it and each file transfer, oldest first, paged by event id (``TracePage.next_cursor``)
or followed live (:func:`follow`, NDJSON until the sandbox ends). A *run* is every sandbox
of the team whose metadata holds given pairs (:func:`run`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

from bac import _errors as e
from bac import _ndjson as ndjson
from bac._api import ApiClient, api_error
from bac._config import ConnectionConfig
from bac._models import parse_time


@dataclass(frozen=True)
class TraceEvent:
    """One event: ``kind`` is ``created``, ``paused``, ..., ``process`` or ``transfer``;
    ``fields`` its details (a process: ``cmd``, ``exit_code`` or ``signal``,
    ``duration_ms``, ``stdout_bytes``, ``timed_out``, ...; a transfer: ``direction``,
    ``path``, ``bytes``, ``ok``, ...); ``metadata`` the sandbox's when it was written."""

    id: int
    sandbox_id: str
    timestamp: datetime
    kind: str
    level: str
    message: str
    fields: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> TraceEvent:
        try:
            return cls(id=int(body["id"]), sandbox_id=str(body["sandboxID"]),
                       timestamp=parse_time(body["timestamp"], "timestamp"),
                       kind=str(body["kind"]), level=str(body["level"]),
                       message=str(body["message"]), fields=dict(body.get("fields") or {}),
                       metadata=dict(body.get("metadata") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise e.ServerError(f"the server sent a malformed trace event: {exc}") from exc


@dataclass(frozen=True)
class TracePage:
    events: list[TraceEvent]
    next_cursor: int | None  # pass as ``after`` for the next page; None at the end


@dataclass(frozen=True)
class SandboxLogEntry:
    """One line of ``GET /sandboxes/{id}/logs`` (E2B's ``logEntries``)."""

    timestamp: datetime
    level: str
    message: str
    fields: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SandboxMetrics:
    """One resource sample (E2B's ``SandboxMetrics``)."""

    timestamp: datetime
    cpu_count: int
    cpu_used_pct: float
    mem_used: int
    mem_total: int
    mem_cache: int
    disk_used: int
    disk_total: int


def _ms(value: datetime | None) -> str | None:
    return None if value is None else str(int(value.timestamp() * 1000))


def _params(kinds: Collection[str] | None, since: datetime | None, until: datetime | None,
            after: int, limit: int | None) -> dict[str, str]:
    params = {"kind": ",".join(kinds) if kinds else None, "since": _ms(since),
              "until": _ms(until), "after": str(after) if after else None,
              "limit": None if limit is None else str(limit)}
    return {k: v for k, v in params.items() if v is not None}


def _page(body: Any) -> TracePage:
    if not isinstance(body, dict) or not isinstance(body.get("events"), list):
        raise e.ServerError("the server sent a trace page without events")
    cursor = body.get("nextCursor")
    return TracePage([TraceEvent.from_api(x) for x in body["events"]],
                     None if cursor in (None, "") else int(cursor))


def _path(sandbox_id: str) -> str:
    return f"/sandboxes/{quote(sandbox_id, safe='')}"


async def page(api: ApiClient, sandbox_id: str, *, kinds: Collection[str] | None = None,
               since: datetime | None = None, until: datetime | None = None,
               after: int = 0, limit: int = 100) -> TracePage:
    body = await api.json("GET", _path(sandbox_id) + "/trace",
                          params=_params(kinds, since, until, after, limit),
                          not_found=e.SandboxNotFoundError)
    return _page(body)


async def run(api: ApiClient, metadata: Mapping[str, str], *,
              kinds: Collection[str] | None = None, since: datetime | None = None,
              until: datetime | None = None, after: int = 0, limit: int = 100) -> TracePage:
    if not metadata:
        raise e.InvalidArgumentError("a run is named by at least one metadata pair")
    params = _params(kinds, since, until, after, limit)
    params["metadata"] = ",".join(f"{k}:{v}" for k, v in metadata.items())
    return _page(await api.json("GET", "/trace", params=params))


async def follow(config: ConnectionConfig, sandbox_id: str, *,
                 kinds: Collection[str] | None = None,
                 after: int = 0) -> AsyncGenerator[TraceEvent, None]:
    """Each event after ``after``, then each new one as it is written, until the sandbox
    has ended (close the generator to stop earlier)."""
    params = {**_params(kinds, None, None, after, None), "follow": "true"}
    async with ndjson.opened(config, _path(sandbox_id) + "/trace", params,
                             "trace") as response:
        if response.status_code != 200:
            await response.aread()
            raise api_error(response, e.SandboxNotFoundError)
        async for value in ndjson.objects(response, "trace"):
            yield TraceEvent.from_api(value)


async def logs(api: ApiClient, sandbox_id: str, *, start: datetime | None = None,
               limit: int = 1000) -> list[SandboxLogEntry]:
    params = {"limit": str(limit)}
    if start is not None:
        params["start"] = str(int(start.timestamp() * 1000))
    body = await api.json("GET", _path(sandbox_id) + "/logs", params=params,
                          not_found=e.SandboxNotFoundError)
    try:
        return [SandboxLogEntry(parse_time(x["timestamp"], "timestamp"), str(x["level"]),
                                str(x["message"]), dict(x.get("fields") or {}))
                for x in body["logEntries"]]
    except (KeyError, TypeError) as exc:
        raise e.ServerError(f"the server sent malformed logs: {exc}") from exc


async def metrics(api: ApiClient, sandbox_id: str, *, start: datetime | None = None,
                  end: datetime | None = None) -> list[SandboxMetrics]:
    params = {k: str(int(v.timestamp())) for k, v in (("start", start), ("end", end))
              if v is not None}
    body = await api.json("GET", _path(sandbox_id) + "/metrics", params=params,
                          not_found=e.SandboxNotFoundError)
    try:
        return [SandboxMetrics(parse_time(x["timestamp"], "timestamp"), int(x["cpuCount"]),
                               float(x["cpuUsedPct"]), int(x["memUsed"]), int(x["memTotal"]),
                               int(x.get("memCache", 0)), int(x["diskUsed"]),
                               int(x["diskTotal"]))
                for x in body]
    except (KeyError, TypeError, ValueError) as exc:
        raise e.ServerError(f"the server sent malformed metrics: {exc}") from exc
