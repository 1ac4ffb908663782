"""Response pieces more than one resource answers with: the time format and ``Sandbox``
(the answer to create, connect and resume, a checkpoint's restore and each fork).

Every key the SDK's generated models require is always present (a missing one is a
``KeyError`` inside the SDK).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bac_server.control import LiveSandbox

CLIENT_ID = "bac"


def rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def rfc3339_unix(at: float) -> str:
    return rfc3339(datetime.fromtimestamp(at, UTC))


def sandbox(sbx: LiveSandbox, *, envd_version: str, domain: str) -> dict[str, Any]:
    """``Sandbox``: the answer to create and connect."""
    body: dict[str, Any] = {
        "templateID": sbx.template_id,
        "sandboxID": sbx.sandbox_id,
        "clientID": CLIENT_ID,
        "envdVersion": envd_version,
        "envdAccessToken": sbx.envd_access_token,
        "trafficAccessToken": sbx.traffic_access_token,
        "domain": domain,
    }
    if sbx.alias is not None:
        body["alias"] = sbx.alias
    return body
