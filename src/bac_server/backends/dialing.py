"""How the control plane opens a connection to a port inside a sandbox.

On one machine that is a TCP connect to the sandbox's address. With several machines
(docs/scale-out.md) the address exists only on the node that holds the sandbox, and the
connection goes through that node's tunnel: the backend is then a :class:`Dialer`, and
every part that talks to a sandbox (the gateway, the health watch, Mission Control's
envd calls) dials through :func:`dialer_of`'s answer, never with its own connect.

:func:`dialed_transport` gives httpx clients the same path (an ``httpx`` transport whose
connections are dialed), so a client built on it reaches a sandbox wherever it runs;
:func:`connect_client` gives it to the generated Connect clients (their ``http_client``).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator
from typing import Any, Protocol, runtime_checkable

import httpcore
import httpx
import pyqwest


class NotRunningThere(ConnectionError):
    """The machine the dialer went to says the sandbox is not running there (paused,
    gone, moved): the caller's view of it is stale, and its state is worth reading again
    (another API replica may have just paused it)."""


@runtime_checkable
class Dialer(Protocol):
    async def dial(self, sandbox_id: str, address: str, port: int) -> socket.socket:
        """A connected, non-blocking socket to ``port`` of the sandbox (whose address, on
        the machine that holds it, is ``address``), with ``TCP_NODELAY`` set (requests
        and answers are small and must not wait for each other). ``OSError`` when none
        opens, ``NotRunningThere`` when the sandbox's machine says it is not running."""
        ...


class DirectDialer:
    """The sandbox's address is reachable from here (one machine)."""

    async def dial(self, sandbox_id: str, address: str, port: int) -> socket.socket:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await asyncio.get_running_loop().sock_connect(sock, (address, port))
        except BaseException:
            sock.close()
            raise
        return sock


DIRECT = DirectDialer()


def dialer_of(backend: object) -> Dialer:
    """The backend itself when it dials, else the direct connect."""
    return backend if isinstance(backend, Dialer) else DIRECT


async def open_dialed(dialer: Dialer, sandbox_id: str, address: str, port: int,
                      limit: int = 1 << 16
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """``asyncio.open_connection`` through ``dialer``."""
    sock = await dialer.dial(sandbox_id, address, port)
    try:
        return await asyncio.open_connection(sock=sock, limit=limit)
    except BaseException:
        sock.close()
        raise


class _Stream(httpcore.AsyncNetworkStream):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    # httpcore's interface passes timeouts as arguments.
    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        try:
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore.ReadError(str(exc)) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        try:
            async with asyncio.timeout(timeout):
                self._writer.write(buffer)
                await self._writer.drain()
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore.WriteError(str(exc)) from exc

    async def aclose(self) -> None:
        self._writer.close()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None,  # noqa: ASYNC109
                        ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("sandbox connections are plain HTTP")

    def get_extra_info(self, info: str) -> Any:
        return self._writer.get_extra_info(info)


class _Backend(httpcore.AsyncNetworkBackend):
    def __init__(self, dialer: Dialer, sandbox_id: str) -> None:
        self._dialer = dialer
        self._sandbox_id = sandbox_id

    async def connect_tcp(self, host: str, port: int,
                          timeout: float | None = None,  # noqa: ASYNC109
                          local_address: str | None = None,
                          socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await open_dialed(self._dialer, self._sandbox_id, host, port)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return _Stream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _DialedTransport(httpx.AsyncBaseTransport):
    """httpx's own mapping onto an httpcore pool, the pool's connections dialed."""

    def __init__(self, pool: httpcore.AsyncConnectionPool) -> None:
        self._pool = pool

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=request.url.raw_scheme, host=request.url.raw_host,
                             port=request.url.port, target=request.url.raw_path),
            headers=request.headers.raw, content=request.stream,
            extensions=request.extensions)
        response = await self._pool.handle_async_request(core)
        return httpx.Response(status_code=response.status, headers=response.headers,
                              stream=_Body(response), extensions=response.extensions)

    async def aclose(self) -> None:
        await self._pool.aclose()


class _Body(httpx.AsyncByteStream):
    def __init__(self, response: httpcore.Response) -> None:
        self._response = response

    async def __aiter__(self) -> Any:
        async for part in self._response.aiter_stream():
            yield part

    async def aclose(self) -> None:
        await self._response.aclose()


def dialed_transport(dialer: Dialer, sandbox_id: str) -> httpx.AsyncBaseTransport:
    """An httpx transport to the sandbox ``sandbox_id`` (plain HTTP) through ``dialer``;
    the direct dialer gets httpx's own transport."""
    if isinstance(dialer, DirectDialer):
        return httpx.AsyncHTTPTransport()
    return _DialedTransport(httpcore.AsyncConnectionPool(
        network_backend=_Backend(dialer, sandbox_id)))


class _QwestOverHttpx:
    """A pyqwest ``Transport``, what the generated Connect clients send through, whose
    requests go out over an httpx transport (a dialed one). Streams both ways: a
    request's body as it is given, a response's as it arrives."""

    def __init__(self, transport: httpx.AsyncBaseTransport) -> None:
        # The Connect client keeps its own deadline; a stream may last as long as that.
        self._http = httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(
            connect=10.0, read=None, write=None, pool=None))

    async def execute(self, request: pyqwest.Request) -> pyqwest.Response:
        sent = self._http.build_request(request.method, request.url,
                                        headers=list(request.headers.items()),
                                        content=request.content)
        got = await self._http.send(sent, stream=True)

        async def body() -> AsyncIterator[bytes]:
            try:
                async for chunk in got.aiter_raw():
                    yield chunk
            finally:
                await got.aclose()

        return pyqwest.Response(status=got.status_code,
                                headers=pyqwest.Headers(got.headers.multi_items()),
                                content=body())

    async def aclose(self) -> None:
        await self._http.aclose()


@contextlib.asynccontextmanager
async def connect_client(dialer: Dialer, sandbox_id: str) -> AsyncIterator[pyqwest.Client | None]:
    """The HTTP client a generated Connect client of the sandbox takes (``http_client``):
    None for the direct dialer (the Connect client's own, which connects directly), else
    one whose connections are dialed; closed on exit."""
    if isinstance(dialer, DirectDialer):
        yield None
        return
    transport = _QwestOverHttpx(dialed_transport(dialer, sandbox_id))
    try:
        yield pyqwest.Client(transport)
    finally:
        await transport.aclose()
