"""Networking through a real Bac server and the official e2b SDK: the create request's
policy, runtime updates, the usage route, bad input, ingress through the gateway (HTTP
and WebSocket, with the traffic token) and no path from a sandbox to the server itself."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from e2b import Sandbox
from fake_internet import SITE_A, SITE_B, FakeInternet
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat"))

from bac_process import ServerProcess, running

pytestmark = [pytest.mark.root]
WS_ECHO = Path(__file__).with_name("ws_echo.py").read_text()
PROBE = ("import socket, sys\nfor host, port in [{targets}]:\n    s = socket.socket()\n"
         "    s.settimeout(3)\n    try:\n        s.connect((host, port))\n"
         "        print(host, port, 'open')\n"
         "    except OSError as exc:\n        print(host, port, 'closed', exc.errno)\n")


@pytest.fixture(scope="module")
def server(internet: FakeInternet) -> Iterator[ServerProcess]:
    with running("network", BAC_DNS_UPSTREAMS=internet.dns_server, BAC_POOL_SIZE="1") as srv:
        srv.create_key("network")
        saved = {k: os.environ.get(k) for k in ("E2B_API_URL", "E2B_SANDBOX_URL", "E2B_API_KEY")}
        os.environ.update(E2B_API_URL=srv.url, E2B_SANDBOX_URL=srv.url, E2B_API_KEY=srv.keys[0])
        yield srv
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)


def _curl(sbx: Sandbox, url: str) -> str:
    result = sbx.commands.run(f"curl -s -m 3 -o /dev/null -w '%{{http_code}}' {url} || true")
    return result.stdout.strip()


def test_create_policy_and_runtime_update(server: ServerProcess) -> None:
    """allowOut/denyOut from the create request are enforced, update_network replaces
    them for the next connection, and the usage route reports traffic and destinations."""
    sbx = Sandbox.create(timeout=120, network={"allow_out": ["allowed.test"],
                                               "deny_out": ["0.0.0.0/0"]})
    try:
        assert _curl(sbx, "http://allowed.test/") == "200"
        assert _curl(sbx, f"http://{SITE_B}/") == "000"
        sbx.update_network({"allow_out": [SITE_B], "deny_out": ["0.0.0.0/0"]})
        assert _curl(sbx, f"http://{SITE_B}/") == "200"
        assert _curl(sbx, "http://allowed.test/") == "000"
        headers = {"X-API-KEY": server.keys[0]}
        usage = httpx.get(f"{server.url}/sandboxes/{sbx.sandbox_id}/network", headers=headers)
        assert usage.status_code == 200, usage.text
        body = usage.json()
        assert body["allowOut"] == [f"{SITE_B}/32"] and body["denyOut"] == ["0.0.0.0/0"]
        assert body["traffic"]["internetBytesOut"] > 0
        seen = {(d["address"], d["port"], d["allowed"]) for d in body["destinations"]}
        assert (SITE_A, 80, True) in seen and (SITE_B, 80, True) in seen
        info = sbx.get_info()
        assert info.network is not None and info.network.get("allow_out") == [f"{SITE_B}/32"]
    finally:
        sbx.kill()


def test_internet_off_through_the_sdk(server: ServerProcess) -> None:
    """allow_internet_access=False leaves the sandbox nothing outside."""
    sbx = Sandbox.create(timeout=120, allow_internet_access=False)
    try:
        assert _curl(sbx, f"http://{SITE_A}/") == "000"
        assert sbx.get_info().allow_internet_access is False
    finally:
        sbx.kill()


@pytest.mark.parametrize(("network", "named"), [
    ({"allowOut": ["1.2.3.0/33"], "denyOut": ["0.0.0.0/0"]}, "network.allowOut[0]"),
    ({"denyOut": ["10.0.0.0/8", "300.1.1.1"]}, "network.denyOut[1]"),
    ({"allowOut": ["ok.test", "bad..name"], "denyOut": ["0.0.0.0/0"]}, "network.allowOut[1]"),
    ({"allowOut": ["*.*.test"], "denyOut": ["0.0.0.0/0"]}, "network.allowOut[0]"),
    ({"allowOut": ["example.com"]}, "network.allowOut[0]"),
    ({"allowOut": ["1.2.3.4:99999"]}, "network.allowOut[0]"),
    ({"dnsServers": ["resolver.test"]}, "network.dnsServers[0]"),
])
def test_bad_entries_are_400_naming_the_entry(server: ServerProcess, network: dict[str, object],
                                              named: str) -> None:
    """Malformed CIDRs, domain patterns and ports are refused, on create and on update,
    with a message naming the entry."""
    headers = {"X-API-KEY": server.keys[0]}
    created = httpx.post(f"{server.url}/v2/sandboxes", headers=headers, timeout=30,
                         json={"templateID": "base", "network": network})
    assert created.status_code == 400, created.text
    assert named in created.json()["message"]
    updated = httpx.put(f"{server.url}/sandboxes/nosuchsandbox/network", headers=headers,
                        json=network)
    assert updated.status_code == 400 and named in updated.json()["message"]


def _wait_open(server: ServerProcess, headers: dict[str, str]) -> httpx.Response:
    deadline = time.monotonic() + 30
    response = httpx.get(server.url + "/", headers=headers)
    while response.status_code == 502 and time.monotonic() < deadline:
        # Nothing tells the host when the server inside has bound its port: poll.
        time.sleep(0.1)
        response = httpx.get(server.url + "/", headers=headers)
    return response


def test_ingress_http_and_websocket_with_traffic_token(server: ServerProcess) -> None:
    """A web server and a WebSocket server in a sandbox answer through the gateway (by
    headers and by host name); with public traffic off both need the traffic token."""
    sbx = Sandbox.create(timeout=120, network={"allow_public_traffic": False})
    try:
        token = sbx.traffic_access_token
        assert token
        sbx.files.write("/home/user/ws_echo.py", WS_ECHO)
        sbx.commands.run("python3 -m http.server 8000", background=True, cwd="/home/user")
        sbx.commands.run("python3 /home/user/ws_echo.py 8765", background=True)
        route = {"E2b-Sandbox-Id": sbx.sandbox_id, "E2b-Sandbox-Port": "8000"}
        assert _wait_open(server, {**route, "e2b-traffic-access-token": token}).status_code \
            == 200
        refused = httpx.get(server.url + "/", headers=route)
        assert refused.status_code == 403
        wrong = httpx.get(server.url + "/", headers={**route,
                                                    "e2b-traffic-access-token": "x" * 32})
        assert wrong.status_code == 403
        by_host = httpx.get(server.url + "/", headers={"Host": sbx.get_host(8000),
                                                        "e2b-traffic-access-token": token})
        assert by_host.status_code == 200
        ws_route = {"E2b-Sandbox-Id": sbx.sandbox_id, "E2b-Sandbox-Port": "8765"}
        uri = server.url.replace("http://", "ws://") + "/"
        # Wait inside the sandbox for the port to listen (a bounded poll: nothing announces it).
        sbx.commands.run("for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8765) "
                         "2>/dev/null && break; sleep 0.1; done")
        with ws_connect(uri, additional_headers={**ws_route,
                                                 "e2b-traffic-access-token": token}) as ws:
            ws.send("hello")
            assert ws.recv(timeout=10) == "echo:hello"
        with pytest.raises(InvalidStatus) as denied:
            ws_connect(uri, additional_headers=ws_route)
        assert denied.value.response.status_code == 403
    finally:
        sbx.kill()


def test_sandbox_cannot_reach_the_server_itself(server: ServerProcess) -> None:
    """The server's own port is reachable from the host on every host address but from a
    sandbox on none of them (the positive control makes the test able to fail)."""
    sbx = Sandbox.create(timeout=120)
    try:
        port = server.port
        assert httpx.get(f"{server.url}/health").status_code == 200
        host_side = sbx.commands.run("ip -4 route show default | awk '{print $3}'").stdout.strip()
        targets = f"('{host_side}', {port}), ('127.0.0.1', {port}), ('10.203.255.1', {port})"
        sbx.files.write("/tmp/probe.py", PROBE.format(targets=targets))
        lines = sbx.commands.run("python3 /tmp/probe.py").stdout.strip().splitlines()
        assert len(lines) == 3 and not [line for line in lines if "open" in line], lines
    finally:
        sbx.kill()


def test_bac_sdk_network(server: ServerProcess) -> None:
    """Bac's own SDK sets the policy at create, replaces it, reads the usage report, and
    names the gateway host of a port."""
    from bac import Sandbox as BacSandbox

    opts = {"api_url": server.url, "api_key": server.keys[0], "sandbox_url": server.url}
    sbx = BacSandbox.create(timeout=120, network={"allow_out": [SITE_A],
                                                  "deny_out": ["0.0.0.0/0"]}, **opts)
    with sbx:  # killed, and its connections closed, at the end
        check = f"curl -s -m 3 -o /dev/null -w '%{{http_code}}' http://{SITE_B}/ || true"
        assert sbx.commands.run(check).stdout.strip() == "000"
        sbx.update_network({"allow_out": [SITE_B], "deny_out": ["0.0.0.0/0"]})
        assert sbx.commands.run(check).stdout.strip() == "200"
        usage = sbx.network_usage()
        assert usage["allowOut"] == [f"{SITE_B}/32"]
        assert any(d["address"] == SITE_B and d["allowed"] for d in usage["destinations"])
        # The server's domain and the port it was reached on: an address that works as is.
        assert sbx.get_host(8000) == f"8000-{sbx.sandbox_id}.localhost:{server.port}"
