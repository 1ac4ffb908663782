"""The per-sandbox listeners (the DNS resolver's and the egress relay's) let go of their
ports when closed, and when their opening is cancelled at any point: a server stopping
in-process (a test's, or one restarted by its supervisor in the same process) can listen
on the same addresses again at once, and no socket is left for the loop to hold."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn

import pytest

from bac_server.backends.namespaces.network._dns import DNS_PORT, DnsListeners
from bac_server.backends.namespaces.network._proxy import EgressProxy, upstream_context
from bac_server.host import EGRESS_PROXY_PORT as PROXY_PORT

pytestmark = [pytest.mark.root]  # port 53

ADDRESS = "127.0.0.53"


async def _nothing(client: str, query: bytes) -> bytes | None:
    return None


def _free(kinds_ports: list[tuple[socket.SocketKind, int]]) -> None:
    for kind, port in kinds_ports:
        with socket.socket(socket.AF_INET, kind) as again:
            again.bind((ADDRESS, port))  # EADDRINUSE while a socket is left open


async def test_closed_listeners_free_both_ports_at_once() -> None:
    listeners = DnsListeners(_nothing)
    await listeners.listen(ADDRESS)
    await listeners.close_all()
    _free([(socket.SOCK_DGRAM, DNS_PORT), (socket.SOCK_STREAM, DNS_PORT)])


Ports = list[tuple[socket.SocketKind, int]]
Opening = Callable[[], Coroutine[Any, Any, None]]
Made = tuple[Opening, Opening, Ports]


def _dns() -> Made:
    listeners = DnsListeners(_nothing)
    return (lambda: listeners.listen(ADDRESS), listeners.close_all,
            [(socket.SOCK_DGRAM, DNS_PORT), (socket.SOCK_STREAM, DNS_PORT)])


def _relay() -> Made:
    proxy = EgressProxy(_never, _never, None, None, upstream_context(b""))

    async def close() -> None:
        proxy.close_all()

    return lambda: proxy.listen(ADDRESS), close, [(socket.SOCK_STREAM, PROXY_PORT)]


def _never(*args: Any) -> NoReturn:
    raise AssertionError("no connection is made")


@pytest.mark.parametrize("make", [_dns, _relay], ids=["dns", "relay"])
async def test_a_listen_cancelled_at_any_turn_leaves_no_socket(
        make: Callable[[], Made]) -> None:
    """The stock's refill is cancelled when the server stops, wherever it is: each turn
    of the loop a listen takes is tried, until a listen completes before the cancel."""
    turns = 0
    while True:
        listen, close, ports = make()
        task = asyncio.create_task(listen())
        for _ in range(turns):
            await asyncio.sleep(0)
        if task.done():
            await task
            await close()
            _free(ports)
            break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)  # a datagram transport closes a turn later
        _free(ports)
        turns += 1
    assert turns >= 2, "the listen never yielded: nothing was tried"
