"""Content negotiation for ``/files``: gzip or identity, as E2B envd negotiates it."""

from __future__ import annotations

GZIP = "gzip"
IDENTITY = ""


class EncodingError(ValueError):
    """No acceptable response encoding, or an unsupported request encoding."""


def _parse(item: str) -> tuple[str, float]:
    name, _, params = item.strip().partition(";")
    quality = 1.0
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key.lower() == "q":
            try:
                quality = float(value)
            except ValueError:
                pass
    return name.strip().lower(), quality


def response_encoding(accept_encoding: str | None) -> str:
    """GZIP or IDENTITY for a download, by quality; identity is acceptable unless q=0."""
    if not accept_encoding:
        return IDENTITY
    offers = sorted(
        (_parse(item) for item in accept_encoding.split(",") if item.strip()),
        key=lambda offer: -offer[1],
    )
    identity_rejected = any(name == "identity" and q == 0 for name, q in offers)
    for name, quality in offers:
        if quality == 0:
            continue
        if name == "identity":
            return IDENTITY
        if name == "*":
            return GZIP if identity_rejected else IDENTITY
        if name == GZIP:
            return GZIP
    if not identity_rejected:
        return IDENTITY
    raise EncodingError("no acceptable encoding found, supported: [gzip]")


def request_encoding(content_encoding: str | None) -> str:
    """GZIP or IDENTITY for an upload body."""
    if not content_encoding:
        return IDENTITY
    name, _ = _parse(content_encoding)
    if name == "identity":
        return IDENTITY
    if name == GZIP:
        return GZIP
    raise EncodingError(f"unsupported Content-Encoding: {content_encoding}, supported: [gzip]")
