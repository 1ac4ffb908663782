"""Where a webhook may point: ``http``/``https`` URLs whose every address is public, unless
the operator allows more with ``BAC_WEBHOOK_ALLOW`` (names, ``name:port``, CIDRs; the
rules of :class:`bac_server.host.Destinations`, which FROM registries obey too).

A URL is checked when a webhook is made or changed and again at each delivery, which
connects to the address it checked (the name is not resolved a second time by the HTTP
client, so a name that changes its answer cannot turn a checked URL into a private one):
the request goes to that address with the URL's ``Host`` and, for https, its name as SNI
and as the name the certificate must carry.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from dataclasses import dataclass

from bac_server.host import Destinations, UnresolvedName, resolve

MAX_URL_CHARS = 2048


class RefusedDestination(Exception):
    """The URL may not be delivered to; the message says why (nothing a remote said)."""


@dataclass(frozen=True)
class Target:
    url: str  # the URL with its host replaced by the checked address
    host_header: str
    server_name: str


def parse_url(url: str) -> urllib.parse.SplitResult:
    """The URL split, if it is one a webhook may have (``RefusedDestination`` else)."""
    if len(url) > MAX_URL_CHARS:
        raise RefusedDestination(f"url is longer than {MAX_URL_CHARS} characters")
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise RefusedDestination(f"url is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RefusedDestination("url must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise RefusedDestination("url must not carry credentials")
    if any(ch.isspace() or ord(ch) < 0x20 for ch in url):
        raise RefusedDestination("url must not contain spaces or control characters")
    return parts


@dataclass(frozen=True)
class WebhookDestinations:
    rules: Destinations

    async def target(self, url: str) -> Target:
        """The checked address to send ``url``'s requests to; ``RefusedDestination``."""
        parts = parse_url(url)
        host = (parts.hostname or "").lower()
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            addresses = await resolve(host, port)
        except UnresolvedName:
            raise RefusedDestination(f"url host {host!r} does not resolve") from None
        if not self.rules.allowed_name(host, parts.port):
            refused = await self.rules.first_refusal(addresses)
            if refused is not None:
                address, reason = refused
                # SECURITY: refused before any connection is made.
                raise RefusedDestination(
                    f"url host {host!r} is refused: {address} is {reason}; an operator may "
                    "allow it with BAC_WEBHOOK_ALLOW")
        chosen = sorted(addresses, key=lambda a: (a.version, str(a)))[0]
        shown = f"[{chosen}]" if isinstance(chosen, ipaddress.IPv6Address) else str(chosen)
        netloc = f"{shown}:{port}"
        pinned = urllib.parse.urlunsplit(
            (parts.scheme, netloc, parts.path or "/", parts.query, ""))
        return Target(pinned, parts.netloc.rpartition("@")[2], host)
