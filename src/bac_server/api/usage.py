"""Usage and cost to date (Bac's own routes; docs/observability.md, "Usage and cost").

* ``GET /usage``  the team's usage over the days ``since``..``until`` (YYYY-MM-DD, UTC,
  inclusive; default this month), grouped by ``groupBy`` = ``sandbox`` (default), ``team``,
  ``day`` or ``metadata.<key>``, of the sandboxes whose metadata holds each
  ``metadata=key:value`` given, or of one ``sandboxID``; with the price table applied.
* ``GET /sandboxes/{id}/usage``  one sandbox's over its whole life, live or ended.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bac_server.api.caps import cap_view
from bac_server.api.context import plane, sandbox_id, team
from bac_server.api.trace import metadata_pairs
from bac_server.control import NotSupported
from bac_server.control.metering import PriceTable, UsageLine, UsageReports


def _reports(request: Request) -> UsageReports:
    reports = plane(request).usage
    if reports is None:
        raise NotSupported("this server does not meter usage")
    return reports


def _figure(line: UsageLine) -> dict[str, Any]:
    u = line.usage
    return {"vcpuSeconds": round(u.vcpu_seconds, 6),
            "memoryGibSeconds": round(u.memory_gib_seconds, 6),
            "storageGibHours": round(u.storage_gib_hours, 9),
            "cpuUsedSeconds": round(u.cpu_used_seconds, 6), "cost": line.cost}


def _prices(prices: PriceTable) -> dict[str, Any]:
    return {"vcpuSecond": prices.vcpu_second, "memoryGibSecond": prices.memory_gib_second,
            "storageGibHour": prices.storage_gib_hour, "cpu": prices.cpu.value}


async def team_usage(request: Request) -> Response:
    caller = await team(request)
    reports = _reports(request)
    params = request.query_params
    report = await reports.report(
        caller, group_by=params.get("groupBy") or "sandbox",
        metadata=metadata_pairs(request), sandbox_id=params.get("sandboxID") or None,
        since=params.get("since") or None, until=params.get("until") or None)
    return JSONResponse({
        "currency": reports.prices.currency, "prices": _prices(reports.prices),
        "since": report.since, "until": report.until, "total": _figure(report.total),
        "groups": [{"key": line.key} | _figure(line) for line in report.lines],
    })


async def sandbox_usage(request: Request) -> Response:
    caller = await team(request)
    reports = _reports(request)
    record, line = await reports.sandbox(caller, sandbox_id(request))
    caps = plane(request).caps
    covering = [] if caps is None else caps.covering(caller, record.sandbox_id,
                                                     dict(record.metadata))
    return JSONResponse({"sandboxID": line.key, "currency": reports.prices.currency}
                        | _figure(line) | {"caps": [cap_view(c) for c in covering]})
