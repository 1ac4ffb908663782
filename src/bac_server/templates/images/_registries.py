"""Which registries a build may pull FROM: none on this machine or on a private network,
unless the operator allows it.

skopeo runs as host root, so ``FROM 127.0.0.1:<port>/x`` (or a private address, or a
name resolving to one) would have the host connect to whatever listens there, and the
error would tell the build what answered. Before skopeo is run the registry's name is
resolved (every address it has) and each address is checked: loopback, private (RFC
1918, ULA), link-local, CGNAT, multicast, reserved and the other non-global ranges, the
host's own addresses and the sandboxes' address pool are refused (``FORBIDDEN``), with
no connection made and a message that says only what was refused and why.

The rules are the host's (``host.Destinations``, which webhooks' URLs obey too). The
operator allows more with ``BAC_REGISTRY_ALLOW`` (``RegistryAccess.parse``):
comma-separated registry names (``host`` for any port, ``host:port`` for one) and CIDRs
(every address the name resolves to must lie in one). The registry mirror
(``BAC_REGISTRY_MIRROR``) is the operator's choice too, so it is allowed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bac_server.host import Destinations, UnresolvedName, resolve, split_host

from ._model import ImageError, ImageErrorKind
from ._refs import RegistryImage


@dataclass(frozen=True)
class RegistryAccess:
    """The registries a build may reach beyond the public internet."""

    rules: Destinations = field(default_factory=Destinations)

    @classmethod
    def parse(cls, text: str, refused: Sequence[str] = ()) -> RegistryAccess:
        """``BAC_REGISTRY_ALLOW``'s entries; raises ValueError naming a bad one."""
        try:
            return cls(Destinations.parse(text, refused))
        except ValueError as exc:
            raise ValueError(str(exc).replace("a host[:port]", "a registry host[:port]")) \
                from None

    def with_host(self, host: str | None) -> RegistryAccess:
        """These rules plus ``host`` (the operator's mirror) allowed."""
        return RegistryAccess(self.rules.with_host(host))

    async def check(self, image: RegistryImage, what: str) -> None:
        """Raise ImageError (FORBIDDEN) unless every address of ``image``'s registry may
        be reached; nothing is sent to the registry."""
        name, port = split_host(image.host.lower())
        if self.rules.allowed_name(name, port):
            return
        try:
            addresses = await resolve(name, port or 443)
        except UnresolvedName as exc:
            raise ImageError(f"{what}: registry {image.host} unreachable: its name does not "
                             "resolve", ImageErrorKind.UNREACHABLE) from exc
        refused = await self.rules.first_refusal(addresses)
        if refused is not None:
            address, reason = refused
            # SECURITY: refused before any connection; the message says only what the
            # server itself decided, nothing a remote could have answered.
            raise ImageError(
                f"{what}: registry {image.host} is refused: {address} is {reason}; "
                "an operator may allow it with BAC_REGISTRY_ALLOW", ImageErrorKind.FORBIDDEN)
