"""The gateway over real sockets: routing, error contract, streaming both ways, WebSockets.

Upstreams are real HTTP servers on loopback standing in for sandbox ports; the registry
routes to them exactly as it routes to a sandbox's address.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from bac_process import ServerProcess
from e2b import AsyncSandbox
from gateway_harness import GatewayRig, gateway_rig, sandbox_entry
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import InvalidStatus

pytestmark = pytest.mark.asyncio(loop_scope="session")
DEADLINE = 10


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def rig() -> AsyncIterator[GatewayRig]:
    async with gateway_rig() as rig:
        rig.registry.add(sandbox_entry("sbx1", rig.upstream_port))
        yield rig


def _h(rig: GatewayRig, sandbox_id: str = "sbx1", port: int | None = None) -> dict[str, str]:
    return {"E2b-Sandbox-Id": sandbox_id, "E2b-Sandbox-Port": str(port or rig.upstream_port)}


async def _raw(rig: GatewayRig, request: bytes) -> tuple[int, bytes]:
    host, port = rig.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(request)
    data = await asyncio.wait_for(reader.read(), DEADLINE)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def test_routes_by_headers(rig: GatewayRig) -> None:
    """Requests with E2b-Sandbox-Id/Port reach that port of that sandbox."""
    async with httpx.AsyncClient() as client:
        response = await client.get(rig.url + "/hello", headers=_h(rig))
    assert (response.status_code, response.text) == (200, "hello")


async def test_routes_by_host_name(rig: GatewayRig) -> None:
    """A Host of {port}-{sandboxId}.{domain} routes without any header."""
    async with httpx.AsyncClient() as client:
        response = await client.get(
            rig.url + "/hello", headers={"Host": f"{rig.upstream_port}-sbx1.bac.test:3000"}
        )
    assert (response.status_code, response.text) == (200, "hello")


async def test_other_requests_go_to_the_api(rig: GatewayRig) -> None:
    """Without routing headers or a sandbox host name the request is the API's, not relayed."""
    async with httpx.AsyncClient() as client:
        response = await client.get(rig.url + "/hello")
    assert response.status_code == 404


async def test_unknown_sandbox_is_502_not_found(rig: GatewayRig) -> None:
    """A missing sandbox answers 502 JSON with the phrase the SDKs match."""
    async with httpx.AsyncClient() as client:
        response = await client.get(rig.url + "/health", headers=_h(rig, "nosuch"))
    assert response.status_code == 502
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "sandboxId": "nosuch", "message": "The sandbox was not found", "code": 502,
    }


async def test_closed_port_is_502_port_not_open(rig: GatewayRig) -> None:
    """A running sandbox with nothing on the port answers 502 'port is not open'."""
    async with httpx.AsyncClient() as client:
        response = await client.get(rig.url + "/", headers=_h(rig, port=1))
    assert response.status_code == 502
    assert response.json()["message"] == "The sandbox is running but port is not open"


@pytest.mark.parametrize(
    "headers",
    [{"E2b-Sandbox-Id": "sbx1"}, {"E2b-Sandbox-Port": "49983"},
     {"E2b-Sandbox-Id": "sbx1", "E2b-Sandbox-Port": "99999"},
     {"E2b-Sandbox-Id": "sb-x", "E2b-Sandbox-Port": "1"}],
)
async def test_malformed_routing_headers_are_400(rig: GatewayRig, headers: dict[str, str]) -> None:
    """Half or malformed routing headers are a clear 400, never a relay or a 500."""
    async with httpx.AsyncClient() as client:
        response = await client.get(rig.url + "/hello", headers=headers)
    assert response.status_code == 400
    assert response.json()["code"] == 400


@pytest.mark.parametrize(
    "path", [b"/init", b"//init", b"/%69nit", b"/INIT", b"/./init", b"/init?x=1", b"/freeze"]
)
async def test_internal_envd_routes_are_blocked(rig: GatewayRig, path: bytes) -> None:
    """envd's host-only routes are refused however the path is spelled."""
    status, body = await _raw(
        rig,
        b"POST %s HTTP/1.1\r\nhost: x\r\ne2b-sandbox-id: sbx1\r\ne2b-sandbox-port: %d\r\n"
        b"content-length: 0\r\nconnection: close\r\n\r\n" % (path, rig.upstream_port),
    )
    assert status == 403, body
    assert json.loads(body)["code"] == 403


async def test_traffic_token_guards_non_envd_ports(rig: GatewayRig) -> None:
    """With a traffic token, other ports need e2b-traffic-access-token: 403 missing/invalid."""
    entry = sandbox_entry("secured", rig.upstream_port, traffic_token="tok123")
    entry.attach("127.0.0.1", 49983)  # the upstream is then a non-envd port
    rig.registry.add(entry)
    async with httpx.AsyncClient() as client:
        missing = await client.get(rig.url + "/hello", headers=_h(rig, "secured"))
        wrong = await client.get(
            rig.url + "/hello",
            headers={**_h(rig, "secured"), "E2B-Traffic-Access-Token": "nope"},
        )
        right = await client.get(
            rig.url + "/hello",
            headers={**_h(rig, "secured"), "e2b-traffic-access-token": "tok123"},
        )
    assert missing.status_code == 403
    assert missing.json()["message"].endswith("'e2b-traffic-access-token' is missing")
    assert missing.json()["sandboxId"] == "secured"
    assert wrong.status_code == 403
    assert wrong.json()["message"].endswith("is invalid")
    assert (right.status_code, right.text) == (200, "hello")


async def test_response_stream_is_flushed_per_message(rig: GatewayRig) -> None:
    """Each upstream write reaches the client before the upstream writes the next one."""
    async with httpx.AsyncClient() as client, client.stream(
        "GET", rig.url + "/stepped?n=3", headers=_h(rig)
    ) as response:
        lines = response.aiter_lines()
        async with asyncio.timeout(DEADLINE):
            assert await anext(lines) == "message 0"
            rig.state.proceed.put_nowait(None)
            assert await anext(lines) == "message 1"
            rig.state.proceed.put_nowait(None)
            assert await anext(lines) == "message 2"


async def test_request_body_is_streamed_as_it_arrives(rig: GatewayRig) -> None:
    """A chunked request body reaches the upstream chunk by chunk, while still open."""

    async def body() -> AsyncIterator[bytes]:
        for i in range(3):
            chunk = f"part{i}".encode()
            yield chunk
            async with asyncio.timeout(DEADLINE):
                assert await rig.state.received.get() == chunk

    async with httpx.AsyncClient() as client:
        response = await client.post(rig.url + "/upload", headers=_h(rig), content=body())
    assert response.json() == {"bytes": 15}


async def test_large_bodies_round_trip(rig: GatewayRig) -> None:
    """20 MiB up and back down arrive byte-exact."""
    payload = bytes(range(256)) * (20 * 4096)
    async with httpx.AsyncClient(timeout=60) as client:
        response = await client.post(rig.url + "/echo", headers=_h(rig), content=payload)
    assert response.status_code == 200
    assert response.content == payload


async def test_upstream_connections_are_reused(rig: GatewayRig) -> None:
    """Sequential requests share one pooled upstream connection."""
    rig.state.clients.clear()
    async with httpx.AsyncClient() as client:
        for _ in range(30):
            assert (await client.get(rig.url + "/hello", headers=_h(rig))).status_code == 200
    assert len(rig.state.clients) == 1


async def test_hop_by_hop_headers_are_not_forwarded(rig: GatewayRig) -> None:
    """Connection-scoped headers stay on their hop (those Connection names too), and so do
    the gateway's credentials; path and query pass unchanged."""
    async with httpx.AsyncClient() as client:
        response = await client.get(
            rig.url + "/headers?a=1&b=%20x",
            headers={**_h(rig), "Connection": "keep-alive, x-secret", "X-Secret": "s",
                     "TE": "trailers", "Proxy-Authorization": "Basic eDp5",
                     "X-API-Key": "e2b_key", "X-Custom": "yes"},
        )
    seen = dict(response.json()["headers"])
    assert response.json()["query"] == "a=1&b=%20x"
    assert seen["x-custom"] == "yes"
    assert not {"te", "x-secret", "proxy-authorization", "x-api-key"} & seen.keys(), seen
    assert seen.get("connection") in (None, "keep-alive")


# A header echo server inside a real sandbox: binds, then forks into the background, so
# the command that starts it returns once the port is open.
_ECHO = """
import http.server, json, os
class Echo(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps([[k.lower(), v] for k, v in self.headers.items()]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("0.0.0.0", 8000), Echo)
if os.fork() == 0:
    os.setsid()
    server.serve_forever()
"""


@pytest.mark.root
async def test_a_sandbox_never_sees_its_callers_credentials_or_hop_headers(
        server: ServerProcess) -> None:
    """Through a real server to a real server in a sandbox: the API key, the traffic token
    and every hop-by-hop header (also those ``Connection`` names) end at the gateway;
    the others, envd's own token included, arrive."""
    key = server.keys[0]
    async with httpx.AsyncClient(base_url=server.url, headers={"X-API-KEY": key},
                                 timeout=60) as api:
        created = await api.post("/v2/sandboxes", json={
            "templateID": "base", "network": {"allowPublicTraffic": False}})
        assert created.status_code == 201, created.text
        info = created.json()
        try:
            sbx = await AsyncSandbox.connect(info["sandboxID"], api_key=key, api_url=server.url,
                                             sandbox_url=server.url)
            await sbx.files.write("/tmp/echo.py", _ECHO)
            started = await sbx.commands.run("python3 /tmp/echo.py >/dev/null 2>&1")
            assert started.exit_code == 0
            host, port = server.url.removeprefix("http://").split(":")
            request = (
                "GET /seen HTTP/1.1\r\n"
                f"Host: {host}:{port}\r\n"
                f"E2b-Sandbox-Id: {info['sandboxID']}\r\nE2b-Sandbox-Port: 8000\r\n"
                f"X-API-Key: {key}\r\n"
                f"e2b-traffic-access-token: {info['trafficAccessToken']}\r\n"
                f"X-Access-Token: {info['envdAccessToken']}\r\n"
                "Connection: close, X-Hop-Secret\r\nX-Hop-Secret: s\r\n"
                "Keep-Alive: timeout=5\r\nTE: trailers\r\nTrailer: X-Checksum\r\n"
                "Proxy-Authorization: Basic eDp5\r\nProxy-Connection: keep-alive\r\n"
                "Upgrade: h2c\r\nX-Custom: kept\r\n\r\n").encode()
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(request)
            data = await asyncio.wait_for(reader.read(), DEADLINE)
            writer.close()
            head, _, body = data.partition(b"\r\n\r\n")
            assert head.split()[1] == b"200", data
            seen = dict(json.loads(body))
        finally:
            await api.delete(f"/sandboxes/{info['sandboxID']}")
    gone = {"x-api-key", "e2b-traffic-access-token", "x-hop-secret", "keep-alive", "te",
            "trailer", "proxy-authorization", "proxy-connection", "upgrade"}
    assert not gone & seen.keys(), seen
    assert seen.get("connection") in (None, "close")
    assert seen["x-custom"] == "kept"
    assert seen["x-access-token"] == info["envdAccessToken"]


async def test_client_hang_up_closes_upstream_stream(rig: GatewayRig) -> None:
    """When the client goes away mid-stream, the upstream sees its connection close."""
    rig.state.disconnected.clear()
    async with httpx.AsyncClient() as client, client.stream(
        "GET", rig.url + "/forever", headers=_h(rig)
    ) as response:
        assert await anext(response.aiter_lines()) == "first"
    async with asyncio.timeout(DEADLINE):
        await rig.state.disconnected.wait()


async def test_sandbox_gone_mid_stream_cuts_the_client(rig: GatewayRig) -> None:
    """Removing a sandbox ends relays in flight: the client sees a broken stream."""
    rig.registry.add(sandbox_entry("doomed", rig.upstream_port))
    async with httpx.AsyncClient() as client, client.stream(
        "GET", rig.url + "/forever", headers=_h(rig, "doomed")
    ) as response:
        lines = response.aiter_lines()
        assert await anext(lines) == "first"
        rig.registry.remove("doomed")
        with pytest.raises(httpx.RemoteProtocolError):
            async with asyncio.timeout(DEADLINE):
                await anext(lines)
        after = await client.get(rig.url + "/health", headers=_h(rig, "doomed"))
    assert after.status_code == 502
    assert "was not found" in after.json()["message"]


async def test_websocket_is_relayed_both_ways(rig: GatewayRig) -> None:
    """Text and binary WebSocket messages pass both ways; the subprotocol is negotiated."""
    uri = rig.url.replace("http://", "ws://") + "/ws"
    async with ws_connect(uri, additional_headers=_h(rig), subprotocols=["chat"]) as ws:
        assert ws.subprotocol == "chat"
        await ws.send("hi")
        assert await ws.recv() == "echo:hi"
        await ws.send(b"\x00\x01")
        assert await ws.recv() == b"echo:\x00\x01"


async def test_websocket_upgrades_pass_without_the_callers_credentials(rig: GatewayRig) -> None:
    """A WebSocket is relayed (its upgrade is the relay's own), but the API key, the
    traffic token and the headers ``Connection`` names stay at the gateway."""
    uri = rig.url.replace("http://", "ws://") + "/ws-headers"
    headers = {**_h(rig), "X-API-Key": "e2b_key", "e2b-traffic-access-token": "t",
               "Proxy-Authorization": "Basic eDp5", "X-Custom": "yes"}
    async with ws_connect(uri, additional_headers=headers) as ws:
        seen = dict(json.loads(await ws.recv()))
    assert seen["x-custom"] == "yes" and seen["upgrade"] == "websocket"
    assert not {"x-api-key", "e2b-traffic-access-token", "proxy-authorization"} & seen.keys()


async def test_websocket_to_unknown_sandbox_is_refused_with_502(rig: GatewayRig) -> None:
    """A WebSocket to a missing sandbox is refused with the gateway's 502 JSON."""
    uri = rig.url.replace("http://", "ws://") + "/ws"
    with pytest.raises(InvalidStatus) as refused:
        async with ws_connect(uri, additional_headers=_h(rig, "nosuch")):
            pass
    assert refused.value.response.status_code == 502
    assert b"was not found" in refused.value.response.body


def _signed(path: str, operation: str, token: str, expiration: int | None = None) -> str:
    raw = f"{path}:{operation}::{token}" + (f":{expiration}" if expiration else "")
    digest = hashlib.sha256(raw.encode()).digest()
    return "v1_" + base64.b64encode(digest).rstrip(b"=").decode()


async def test_signed_file_urls_route_by_their_signature(rig: GatewayRig) -> None:
    """A signed /files URL without routing headers reaches the sandbox whose token signed it."""
    rig.registry.add(sandbox_entry("signer", rig.upstream_port))
    read = _signed("a b.txt", "read", "token-signer", 1_900_000_000)
    write = _signed("a b.txt", "write", "token-signer")
    async with httpx.AsyncClient() as client:
        got = await client.get(
            rig.url + "/files",
            params={"path": "a b.txt", "signature": read, "signature_expiration": 1_900_000_000},
        )
        put = await client.post(
            rig.url + "/files", params={"path": "a b.txt", "signature": write}, content=b"x"
        )
        forged = await client.get(
            rig.url + "/files", params={"path": "a b.txt", "signature": _signed("a b.txt",
                                        "read", "not-a-token")},
        )
    assert got.status_code == 200 and got.json()["path"] == "/files"
    assert put.status_code == 200
    assert forged.status_code == 502
    assert "was not found" in forged.json()["message"]
