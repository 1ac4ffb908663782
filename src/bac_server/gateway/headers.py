"""Which of a client's request headers reach the sandbox.

The gateway is a proxy, so the headers that describe the client's hop to it (RFC 9110
§7.6.1: ``Connection`` and every header it names, ``Keep-Alive``, ``Proxy-*``, ``TE``,
``Trailer``, ``Transfer-Encoding``, ``Upgrade``) end here; the relay frames the request
to the sandbox itself. The credentials the gateway and the REST API read (``X-API-Key``,
the traffic token) end here too: code in a sandbox never sees them, so a sandbox cannot
collect its callers' API keys. envd's own ``X-Access-Token`` passes, since envd checks it.
"""

from __future__ import annotations

from collections.abc import Iterable

Headers = Iterable[tuple[bytes, bytes]]

HOP_BY_HOP = frozenset({
    b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
    b"transfer-encoding", b"upgrade", b"expect",
})
CREDENTIALS = frozenset({b"x-api-key", b"e2b-traffic-access-token"})


def connection_named(headers: Headers) -> frozenset[bytes]:
    """The header names that ``Connection`` headers list (lower case)."""
    return frozenset(
        token.strip().lower()
        for name, value in headers if name.lower() == b"connection"
        for token in value.split(b",") if token.strip())


def for_sandbox(headers: Headers) -> list[tuple[bytes, bytes]]:
    """``headers`` (ASGI: lower-case names) without the hop's own and the gateway's
    credentials. A WebSocket relay makes its own handshake (``Upgrade`` included)."""
    listed = list(headers)
    ends_here = HOP_BY_HOP | CREDENTIALS | connection_named(listed)
    return [(name, value) for name, value in listed
            if name not in ends_here and not name.startswith(b"proxy-")]
