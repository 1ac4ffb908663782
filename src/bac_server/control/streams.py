"""Stream tokens: short-lived passes, signed by the server, to one port of one sandbox.

A desktop's stream (noVNC on port 6080) is watched in a browser, which can send neither
an API key nor E2B's traffic-token header. So the gateway lets a request reach a *stream
port* only with a stream token, from the URL's ``bac_stream`` parameter or the cookie the
gateway sets from it; the API hands tokens out to the sandbox's team
(``POST /sandboxes/{id}/streams``). No VNC password travels in any URL.

A token is ``<expiry>.<mac>``: the unix second it ends and an HMAC-SHA256 over the
sandbox id, the port and that expiry, keyed by a key derived from the sandbox's envd
access token, a secret the server keeps sealed in its store and each sandbox has its own.
So a token opens one port of one sandbox until it expires, a server restart keeps it
valid, and another sandbox's token, a changed port or expiry, or an expired token is
refused. Whoever holds the sandbox's envd token (its creator, through the SDK) could make
one too, which gives them nothing they do not have: they can already run commands in it.
A token ending further out than ``max_ttl_s`` is refused as well, however it was made.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from urllib.parse import quote

QUERY_PARAMETER = "bac_stream"
# A path under this prefix carries the token as its next segment (framed viewers).
PATH_PREFIX = "/bac_stream/"
COOKIE = "bac_stream"
DEFAULT_PORTS = frozenset({6080})
_KEY_LABEL = b"bac stream token v1"


class StreamCheck(Enum):
    VALID = "valid"
    MISSING = "missing"
    INVALID = "invalid"
    EXPIRED = "expired"


@dataclass(frozen=True)
class StreamToken:
    token: str
    port: int
    expires_at: int


def parse_ports(raw: str) -> frozenset[int]:
    """``"6080,6081"`` → the ports; ``""`` → none. Raises ``ValueError``."""
    ports = set()
    for part in raw.split(","):
        if not part.strip():
            continue
        port = int(part)
        if not 1 <= port <= 65535:
            raise ValueError(f"port {port} is not between 1 and 65535")
        ports.add(port)
    return frozenset(ports)


def _mac(secret: str, sandbox_id: str, port: int, expires_at: int) -> str:
    key = hmac.new(secret.encode(), _KEY_LABEL, hashlib.sha256).digest()
    message = f"{sandbox_id}:{port}:{expires_at}".encode()
    digest = hmac.new(key, message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class StreamTokens:
    def __init__(self, *, ports: frozenset[int] = DEFAULT_PORTS, ttl_s: int = 300,
                 max_ttl_s: int = 3600, clock: Callable[[], float] = time.time) -> None:
        if not 0 < ttl_s <= max_ttl_s:
            raise ValueError("a stream token's default lifetime must be 1..max_ttl_s seconds")
        self.ports = ports
        self.ttl_s = ttl_s
        self.max_ttl_s = max_ttl_s
        self._clock = clock

    def issue(self, sandbox_id: str, secret: str, port: int,
              ttl_s: int | None = None) -> StreamToken:
        """A token for ``port`` of ``sandbox_id``; ``secret`` is its envd access token."""
        if not secret:
            # SECURITY: an empty key would make tokens anyone can compute.
            raise ValueError("the sandbox has no access token to sign with")
        ttl = self.ttl_s if ttl_s is None else ttl_s
        if not 0 < ttl <= self.max_ttl_s:
            raise ValueError(f"a stream token lasts 1..{self.max_ttl_s} seconds")
        expires_at = int(self._clock()) + ttl
        token = f"{expires_at}.{_mac(secret, sandbox_id, port, expires_at)}"
        return StreamToken(token=token, port=port, expires_at=expires_at)

    def seconds_left(self, expires_at: int) -> int:
        return max(0, expires_at - int(self._clock()))

    def check(self, token: str | None, sandbox_id: str, secret: str, port: int) -> StreamCheck:
        """Whether ``token`` opens ``port`` of ``sandbox_id`` now. Fails closed."""
        if not token:
            return StreamCheck.MISSING
        expiry, _, given = token.partition(".")
        if not secret or not expiry.isdigit() or len(expiry) > 12 or not given:
            return StreamCheck.INVALID
        expires_at = int(expiry)
        if not hmac.compare_digest(given.encode(),
                                   _mac(secret, sandbox_id, port, expires_at).encode()):
            return StreamCheck.INVALID
        now = self._clock()
        if expires_at <= now:
            return StreamCheck.EXPIRED
        if expires_at > now + self.max_ttl_s:
            return StreamCheck.INVALID
        return StreamCheck.VALID


def viewer_url(scheme: str, domain: str, sandbox_id: str, port: int, token: str, *,
               framed: bool = False) -> str:
    """The noVNC page a sandbox serves on ``port``, through the gateway by host name
    (``domain``: the sandbox host names' domain as the caller reaches the server), with
    the token for the page (the gateway turns it into a cookie) and in noVNC's WebSocket
    ``path`` (for a viewer whose cookies do not reach the gateway). ``framed``: noVNC's
    lite viewer (the full one needs ``localStorage``, which browsers deny a third-party
    frame) with the token in the path prefix instead, which every relative URL of the page
    keeps, for a page framed in another site's, where no cookie of this host is sent."""
    origin = f"{scheme}://{port}-{sandbox_id}.{domain}"
    if framed:
        prefix = f"{PATH_PREFIX.strip('/')}/{token}"
        return f"{origin}/{prefix}/vnc_lite.html?scale=true&path={quote(prefix + '/websockify')}"
    ws_path = quote(f"websockify?{QUERY_PARAMETER}={token}", safe="")
    return (f"{origin}/vnc.html?{QUERY_PARAMETER}={token}"
            f"&autoconnect=true&resize=scale&reconnect=true&path={ws_path}")
