"""The per-sandbox DNS listeners let go of their ports when closed: a server stopping
in-process (a test's, or one restarted by its supervisor in the same process) can listen
on the same addresses again at once."""

from __future__ import annotations

import socket

import pytest

from bac_server.backends.namespaces.network._dns import DNS_PORT, DnsListeners

pytestmark = [pytest.mark.root]  # port 53

ADDRESS = "127.0.0.53"


async def _nothing(client: str, query: bytes) -> bytes | None:
    return None


async def test_closed_listeners_free_both_ports_at_once() -> None:
    listeners = DnsListeners(_nothing)
    await listeners.listen(ADDRESS)
    await listeners.close_all()
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
        with socket.socket(socket.AF_INET, kind) as again:
            again.bind((ADDRESS, DNS_PORT))  # EADDRINUSE while a socket is left open
