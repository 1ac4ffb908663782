"""Which sandbox and port a request is for (pure functions over the ASGI scope).

Two ways, as E2B's proxy does it:

* host name ``{port}-{sandboxId}.{domain}`` (left-most label split on the first ``-``);
* headers ``E2b-Sandbox-Id`` + ``E2b-Sandbox-Port``, which the SDKs send when
  ``E2B_SANDBOX_URL`` points every sandbox at one address.

A request with neither goes to the REST API. A request with only one of the two headers, or a
port that is not a number in 1-65535, is a client error (400).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

_SANDBOX_ID = b"e2b-sandbox-id"
_SANDBOX_PORT = b"e2b-sandbox-port"
_HOST = b"host"
MAX_ID_LENGTH = 64


class RoutingError(ValueError):
    """The request names a sandbox, but not in a usable way."""


@dataclass(frozen=True, slots=True)
class Target:
    sandbox_id: str
    port: int


def _port(raw: str) -> int:
    if not raw.isdigit() or len(raw) > 5 or not 1 <= int(raw) <= 65535:
        raise RoutingError(f"sandbox port {raw[:16]!r} is not a number between 1 and 65535")
    return int(raw)


def _sandbox_id(raw: str) -> str:
    if not raw or len(raw) > MAX_ID_LENGTH or not (raw.isascii() and raw.isalnum()):
        raise RoutingError(f"sandbox id {raw[:MAX_ID_LENGTH]!r} is not a valid sandbox id")
    return raw.lower()


def from_host(host: str, domain: str) -> Target | None:
    """``49983-abc.example.com[:3000]`` → Target("abc", 49983) when the domain matches."""
    name = host.rpartition(":")[0] if host.count(":") == 1 else host
    name = name.lower().rstrip(".")
    suffix = "." + domain.lower()
    if not name.endswith(suffix):
        return None
    label = name[: -len(suffix)]
    if "." in label or "-" not in label:
        return None
    port, _, sandbox_id = label.partition("-")
    return Target(_sandbox_id(sandbox_id), _port(port))


def target_of(headers: Iterable[tuple[bytes, bytes]], domain: str) -> Target | None:
    """The sandbox target of a request, or None when it is for the REST API."""
    host = sandbox_id = port = None
    for name, value in headers:
        if name == _SANDBOX_ID:
            sandbox_id = value
        elif name == _SANDBOX_PORT:
            port = value
        elif name == _HOST:
            host = value
    if host is not None:
        by_host = from_host(host.decode("latin-1"), domain)
        if by_host is not None:
            return by_host
    if sandbox_id is None and port is None:
        return None
    if sandbox_id is None:
        raise RoutingError("header E2b-Sandbox-Id is missing (E2b-Sandbox-Port was given)")
    if port is None:
        raise RoutingError("header E2b-Sandbox-Port is missing (E2b-Sandbox-Id was given)")
    return Target(_sandbox_id(sandbox_id.decode("latin-1")), _port(port.decode("latin-1")))
