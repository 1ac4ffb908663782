"""The Prometheus scrape endpoint: ``GET /metrics`` on a listener of its own
(``BAC_METRICS_ADDRESS``, loopback by default), apart from the API and the sandboxes'
traffic, as operators expect of an exporter (port 0: any free port, logged); with
``BAC_METRICS_TOKEN`` set a scrape must send ``Authorization: Bearer <token>`` (401
otherwise). A bind beyond loopback without a token is refused at start-up (fail closed).

HTTP/1.1 through h11, one small request at a time per connection; anything but ``GET
/metrics`` is a 404 and a request head over 8 KiB a 431.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging

import h11

from bac_server.control.telemetry import Telemetry

log = logging.getLogger(__name__)

_MAX_HEAD = 8 * 1024
_READ_TIMEOUT_S = 30.0
CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


class ScrapeConfigError(ValueError):
    """The metrics address or token cannot be used."""


def parse_address(address: str, token: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``); a host beyond loopback needs a token."""
    host, sep, port = address.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ScrapeConfigError(f"{address!r} is not host:port")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback and not token:
        raise ScrapeConfigError(f"{address!r} is reachable beyond this machine: set "
                                "BAC_METRICS_TOKEN (scrapes then send it as a bearer token)")
    return host, int(port)


class ScrapeListener:
    def __init__(self, telemetry: Telemetry, host: str, port: int, token: str = "") -> None:
        self._telemetry = telemetry
        self._host, self._port = host, port
        self._expected = f"Bearer {token}".encode() if token else None
        self._server: asyncio.Server | None = None
        self._clients: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, self._port)
        log.info("metrics on http://%s:%d/metrics", self._host, self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            # Closing a connection ends its task (its read sees the end): no cancel.
            for writer in self._clients.values():
                writer.close()
            await asyncio.gather(*self._clients, return_exceptions=True)
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients[task] = writer
        try:
            await self._connection(reader, writer)
        except (OSError, h11.ProtocolError, TimeoutError):
            pass
        finally:
            self._clients.pop(task, None)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD)
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                async with asyncio.timeout(_READ_TIMEOUT_S):
                    data = await reader.read(65536)
                conn.receive_data(data)
                if not data and conn.their_state is not h11.DONE:
                    return
                continue
            if isinstance(event, h11.ConnectionClosed):
                return
            if isinstance(event, h11.Request):
                status, body = self._answer(event)
                headers = [(b"content-type", CONTENT_TYPE if status == 200 else b"text/plain"),
                           (b"content-length", str(len(body)).encode())]
                if status == 401:
                    headers.append((b"www-authenticate", b'Bearer realm="bac metrics"'))
                writer.write(conn.send(h11.Response(status_code=status, headers=headers)) or b"")
                writer.write(conn.send(h11.Data(data=body)) or b"")
                writer.write(conn.send(h11.EndOfMessage()) or b"")
                await writer.drain()
                continue
            if isinstance(event, h11.EndOfMessage):
                if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                    conn.start_next_cycle()
                continue
            # Data of a request body: ignored.

    def _answer(self, request: h11.Request) -> tuple[int, bytes]:
        target = request.target.split(b"?", 1)[0]
        if request.method != b"GET" or target != b"/metrics":
            return 404, b"not found: the metrics are at GET /metrics\n"
        if self._expected is not None:
            given = next((v for n, v in request.headers if n == b"authorization"), b"")
            if not hmac.compare_digest(given, self._expected):
                return 401, b"a bearer token is required\n"
        return 200, self._telemetry.exposition()
