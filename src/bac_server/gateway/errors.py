"""Gateway answers that never reach a sandbox, shaped as the SDKs expect.

The SDKs string-match "was not found" and "port is not open" in 502 bodies to tell a gone
sandbox from a closed port (e2b ``exceptions.py``), and parse ``code`` as an int.
"""

from __future__ import annotations

import json

from starlette.types import Send

NOT_FOUND = "The sandbox was not found"
PORT_CLOSED = "The sandbox is running but port is not open"
NO_TRAFFIC_HEADER = (
    "Sandbox is secured with traffic access token. "
    "Token header 'e2b-traffic-access-token' is missing"
)
BAD_TRAFFIC_HEADER = (
    "Sandbox is secured with traffic access token. "
    "Token header 'e2b-traffic-access-token' is invalid"
)


def error_body(status: int, message: str, sandbox_id: str | None) -> bytes:
    body: dict[str, object] = {"message": message, "code": status}
    if sandbox_id is not None:
        body = {"sandboxId": sandbox_id, **body}
    return json.dumps(body).encode()


async def send_error(send: Send, status: int, message: str, sandbox_id: str | None) -> None:
    body = error_body(status, message, sandbox_id)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})
