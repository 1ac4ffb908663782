"""Tenancy over raw HTTP: a team sees and touches only its own sandboxes; envd and traffic
tokens guard the gateway."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from bac_process import ServerProcess

pytestmark = pytest.mark.root


@pytest.fixture
def beta(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url, headers={"X-API-KEY": server.keys[1]}, timeout=60
    ) as client:
        yield client


@pytest.fixture
def alpha_sandbox(api: httpx.Client) -> Iterator[dict[str, str]]:
    created = api.post(
        "/v2/sandboxes",
        json={"templateID": "base", "network": {"allowPublicTraffic": False}},
    )
    assert created.status_code == 201, created.text
    yield created.json()
    api.delete(f"/sandboxes/{created.json()['sandboxID']}")


def test_other_team_gets_404_everywhere(
    api: httpx.Client, beta: httpx.Client, alpha_sandbox: dict[str, str]
) -> None:
    """Every sandbox route answers 404 to another team, exactly as for a missing sandbox."""
    sid = alpha_sandbox["sandboxID"]
    for method, path, body in [
        ("GET", f"/sandboxes/{sid}", None),
        ("DELETE", f"/sandboxes/{sid}", None),
        ("POST", f"/sandboxes/{sid}/timeout", {"timeout": 1}),
        ("POST", f"/sandboxes/{sid}/refreshes", {}),
        ("POST", f"/sandboxes/{sid}/connect", {"timeout": 10}),
        ("POST", f"/v2/sandboxes/{sid}/connect", {}),
        ("POST", f"/sandboxes/{sid}/pause", {}),
        ("POST", f"/sandboxes/{sid}/resume", {}),
        ("GET", f"/sandboxes/{sid}/metrics", None),
        ("GET", f"/sandboxes/{sid}/logs", None),
        ("GET", f"/v2/sandboxes/{sid}/logs", None),
    ]:
        theirs = beta.request(method, path, json=body)
        missing = beta.request(method, path.replace(sid, "a" * len(sid)), json=body)
        assert theirs.status_code == 404, (method, path, theirs.text)
        assert theirs.json()["message"].replace(sid, "X") == missing.json()["message"].replace(
            "a" * len(sid), "X"
        )
    assert sid not in {s["sandboxID"] for s in beta.get("/v2/sandboxes").json()}
    assert sid not in {s["sandboxID"] for s in beta.get("/sandboxes").json()}
    assert beta.get("/sandboxes/metrics", params={"sandbox_ids": sid}).json() == {
        "sandboxes": {}
    }
    assert api.get(f"/sandboxes/{sid}").json()["state"] == "running"


def test_envd_requires_the_sandbox_token(
    server: ServerProcess, alpha_sandbox: dict[str, str]
) -> None:
    """Through the gateway, envd refuses RPCs without the sandbox's access token."""
    sid = alpha_sandbox["sandboxID"]
    route = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983",
             "Content-Type": "application/json"}
    url = server.url + "/process.Process/List"
    refused = httpx.post(url, headers=route, content=b"{}")
    wrong = httpx.post(url, headers={**route, "X-Access-Token": "nope"}, content=b"{}")
    allowed = httpx.post(
        url, headers={**route, "X-Access-Token": alpha_sandbox["envdAccessToken"]},
        content=b"{}",
    )
    assert refused.status_code == 401 and wrong.status_code == 401
    assert allowed.status_code == 200


def test_traffic_token_guards_other_ports(
    server: ServerProcess, alpha_sandbox: dict[str, str]
) -> None:
    """A sandbox created with allowPublicTraffic=false requires its traffic token on other
    ports (403 without), and the token is returned at create."""
    sid = alpha_sandbox["sandboxID"]
    token = alpha_sandbox["trafficAccessToken"]
    assert token
    route = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "8000"}
    missing = httpx.get(server.url + "/", headers=route)
    assert missing.status_code == 403
    assert "'e2b-traffic-access-token' is missing" in missing.json()["message"]
    with_token = httpx.get(
        server.url + "/", headers={**route, "e2b-traffic-access-token": token}
    )
    assert with_token.status_code == 502
    assert with_token.json()["message"] == "The sandbox is running but port is not open"


def test_init_route_is_not_reachable(server: ServerProcess, alpha_sandbox: dict[str, str]) -> None:
    """envd's /init (re-keying the sandbox) cannot be reached through the gateway."""
    route = {"E2b-Sandbox-Id": alpha_sandbox["sandboxID"], "E2b-Sandbox-Port": "49983",
             "X-Access-Token": alpha_sandbox["envdAccessToken"]}
    response = httpx.post(server.url + "/init", headers=route, json={"accessToken": "mine"})
    assert response.status_code == 403
