"""spec/openapi.yaml is valid, matches the routes, is served, and real responses of every
operation (success and error) conform to it."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import httpx
import pytest
from bac_process import ServerProcess
from openapi_check import SPEC_PATH, check, spec
from openapi_spec_validator import validate

from bac_server.api import ROUTES

pytestmark = pytest.mark.root
DEADLINE = 30.0


def test_spec_is_valid_openapi_3_1() -> None:
    """The document passes the OpenAPI 3.1 validator."""
    assert spec()["openapi"].startswith("3.1")
    validate(spec())


def test_every_route_is_documented_and_nothing_else() -> None:
    """The spec's operations are exactly the API's routes."""
    served = set()
    for route in ROUTES:
        path = re.sub(r"\{sandbox_id(:str)?\}", "{sandboxID}", route.path)
        path = re.sub(r"\{template_id(:path)?\}", "{templateID}", path)
        path = re.sub(r"\{(\w+):\w+\}", r"{\1}", path)
        served |= {(m.lower(), path) for m in route.methods or () if m != "HEAD"}
    documented = {
        (method, path) for path, ops in spec()["paths"].items() for method in ops
        if method != "parameters"
    }
    assert served == documented


def test_spec_is_served(api: httpx.Client) -> None:
    """GET /openapi.yaml returns the checked-in document."""
    response = api.get("/openapi.yaml")
    check("GET", "/openapi.yaml", response)
    assert response.content == SPEC_PATH.read_bytes()


@pytest.fixture
def sandbox_id(api: httpx.Client) -> Iterator[str]:
    created = api.post("/v2/sandboxes", json={"templateID": "base", "metadata": {"k": "v"}})
    check("POST", "/v2/sandboxes", created)
    sid = created.json()["sandboxID"]
    yield sid
    api.delete(f"/sandboxes/{sid}")


def test_lifecycle_responses_conform(api: httpx.Client, sandbox_id: str) -> None:
    """Every sandbox operation answers what the spec says, on success and on error."""
    sid = sandbox_id
    calls = [
        ("GET", "/health", "/health", {}),
        ("GET", "/sandboxes/{sandboxID}", f"/sandboxes/{sid}", {}),
        ("GET", "/sandboxes", "/sandboxes", {}),
        ("GET", "/v2/sandboxes", "/v2/sandboxes", {"params": {"limit": 1}}),
        ("POST", "/sandboxes/{sandboxID}/timeout", f"/sandboxes/{sid}/timeout",
         {"json": {"timeout": 200}}),
        ("POST", "/sandboxes/{sandboxID}/refreshes", f"/sandboxes/{sid}/refreshes",
         {"json": {"duration": 60}}),
        ("POST", "/sandboxes/{sandboxID}/connect", f"/sandboxes/{sid}/connect",
         {"json": {"timeout": 100}}),
        ("POST", "/v2/sandboxes/{sandboxID}/connect", f"/v2/sandboxes/{sid}/connect", {"json": {}}),
        ("GET", "/sandboxes/{sandboxID}/logs", f"/sandboxes/{sid}/logs", {}),
        ("GET", "/v2/sandboxes/{sandboxID}/logs", f"/v2/sandboxes/{sid}/logs",
         {"params": {"direction": "backward", "level": "info"}}),
        ("POST", "/sandboxes/{sandboxID}/pause", f"/sandboxes/{sid}/pause", {"json": {}}),
        ("POST", "/sandboxes/{sandboxID}/pause", f"/sandboxes/{sid}/pause", {"json": {}}),
        ("GET", "/sandboxes/{sandboxID}", f"/sandboxes/{sid}", {}),
        ("POST", "/sandboxes/{sandboxID}/resume", f"/sandboxes/{sid}/resume", {"json": {}}),
        ("POST", "/sandboxes/{sandboxID}/resume", f"/sandboxes/{sid}/resume", {"json": {}}),
        ("POST", "/sandboxes/{sandboxID}/timeout", f"/sandboxes/{sid}/timeout",
         {"json": {"timeout": -1}}),
        ("POST", "/sandboxes", "/sandboxes", {"json": {"templateID": "nosuch"}}),
        ("GET", "/sandboxes/{sandboxID}", "/sandboxes/nosuch", {}),
    ]
    statuses = []
    for method, template, path, kwargs in calls:
        response = api.request(method, path, **kwargs)
        check(method, template, response)
        statuses.append(response.status_code)
    assert statuses == [200, 200, 200, 200, 204, 204, 200, 200, 200, 200, 204, 409, 200, 201,
                        409, 400, 404, 404]


def test_pause_then_connect_resumes_with_201(api: httpx.Client, sandbox_id: str) -> None:
    """Connect on a paused sandbox resumes it (201); the gateway 502s while it is paused."""
    headers = {"E2b-Sandbox-Id": sandbox_id, "E2b-Sandbox-Port": "49983"}
    assert api.get("/health", headers=headers).status_code == 204
    assert api.post(f"/sandboxes/{sandbox_id}/pause", json={}).status_code == 204
    paused = api.get("/health", headers=headers)
    assert paused.status_code == 502 and "was not found" in paused.json()["message"]
    listed = api.get("/v2/sandboxes", params={"state": "paused"}).json()
    assert [s["sandboxID"] for s in listed] == [sandbox_id]
    resumed = api.post(f"/v2/sandboxes/{sandbox_id}/connect", json={"timeout": 60})
    check("POST", "/v2/sandboxes/{sandboxID}/connect", resumed)
    assert resumed.status_code == 201
    assert api.get("/health", headers=headers).status_code == 204


def test_resume_with_auto_pause_makes_the_next_timeout_pause(api: httpx.Client,
                                                             sandbox_id: str) -> None:
    """``autoPause`` on the older resume sets what the timeout does from then on: the
    sandbox says so, and its next timeout pauses it instead of ending it."""
    assert api.post(f"/sandboxes/{sandbox_id}/pause", json={}).status_code == 204
    resumed = api.post(f"/sandboxes/{sandbox_id}/resume", json={"timeout": 60,
                                                                 "autoPause": True})
    assert resumed.status_code == 201
    assert api.get(f"/sandboxes/{sandbox_id}").json()["lifecycle"]["onTimeout"] == "pause"
    assert api.post(f"/sandboxes/{sandbox_id}/timeout", json={"timeout": 0}).status_code == 204
    deadline = time.monotonic() + DEADLINE
    state = api.get(f"/sandboxes/{sandbox_id}").json().get("state")
    while state != "paused" and time.monotonic() < deadline:
        time.sleep(0.2)  # the timeout fires on the server's clock; nothing to wait on
        state = api.get(f"/sandboxes/{sandbox_id}").json().get("state")
    assert state == "paused"


def test_metrics_and_kill_conform(api: httpx.Client, sandbox_id: str) -> None:
    """Metrics (single and many) and kill answer per the spec; the killed sandbox's log ends
    with the kill."""
    deadline = time.monotonic() + DEADLINE
    samples = api.get(f"/sandboxes/{sandbox_id}/metrics")
    while not samples.json() and time.monotonic() < deadline:
        time.sleep(0.2)  # samples are taken on the server's clock; nothing to wait on
        samples = api.get(f"/sandboxes/{sandbox_id}/metrics")
    check("GET", "/sandboxes/{sandboxID}/metrics", samples)
    assert samples.json()
    many = api.get("/sandboxes/metrics", params={"sandbox_ids": f"{sandbox_id},nosuch"})
    check("GET", "/sandboxes/metrics", many)
    assert list(many.json()["sandboxes"]) == [sandbox_id]
    killed = api.delete(f"/sandboxes/{sandbox_id}")
    check("DELETE", "/sandboxes/{sandboxID}", killed)
    again = api.delete(f"/sandboxes/{sandbox_id}")
    check("DELETE", "/sandboxes/{sandboxID}", again)
    assert (killed.status_code, again.status_code) == (204, 404)
    logs = api.get(f"/sandboxes/{sandbox_id}/logs")
    check("GET", "/sandboxes/{sandboxID}/logs", logs)
    kinds = [e["fields"]["kind"] for e in logs.json()["logEntries"]]
    assert kinds[0] == "created" and kinds[1] == "started" and kinds[-1] == "killed"


def test_error_statuses_conform(server: ServerProcess, api: httpx.Client) -> None:
    """401, 413 and query 400s are documented JSON errors."""
    anonymous = httpx.get(server.url + "/v2/sandboxes")
    check("GET", "/v2/sandboxes", anonymous)
    assert anonymous.status_code == 401
    huge = api.post("/v2/sandboxes", content=b"{" + b" " * (2 << 20) + b"}",
                    headers={"Content-Type": "application/json"})
    check("POST", "/v2/sandboxes", huge)
    assert huge.status_code == 413
    bad = api.get("/v2/sandboxes", params={"limit": 1000})
    check("GET", "/v2/sandboxes", bad)
    assert bad.status_code == 400


def test_artefact_responses_conform(api: httpx.Client, sandbox_id: str) -> None:
    """Promote (201, then 200 for the same bytes, 409 for others, 404 for a missing path),
    list, download and delete answer per the spec."""
    run = f"openapi-{time.monotonic_ns()}"
    promote = f"/sandboxes/{sandbox_id}/artefacts"
    route = "/sandboxes/{sandboxID}/artefacts"
    statuses = []
    for path in ("/etc/hostname", "/etc/hostname", "/etc/os-release", "/nowhere"):
        answer = api.post(promote, json={"path": path, "name": "h", "runId": run})
        check("POST", route, answer)
        statuses.append(answer.status_code)
    assert statuses == [201, 200, 409, 404]
    bad = api.post(promote, json={"path": "/etc/hostname", "name": "a/b", "runId": run})
    check("POST", route, bad)
    assert bad.status_code == 400
    listed = api.get("/artefacts", params={"runId": run})
    check("GET", "/artefacts", listed)
    assert [a["name"] for a in listed.json()] == ["h"]
    got = api.get(f"/artefacts/{run}/h")
    check("GET", "/artefacts/{runId}/{name}", got)
    assert got.status_code == 200 and got.headers["x-bac-artefact-sha256"] == \
        listed.json()[0]["sha256"]
    gone = api.delete(f"/artefacts/{run}/h")
    check("DELETE", "/artefacts/{runId}/{name}", gone)
    again = api.get(f"/artefacts/{run}/h")
    check("GET", "/artefacts/{runId}/{name}", again)
    assert (gone.status_code, again.status_code) == (204, 404)


def test_secret_responses_conform(api: httpx.Client) -> None:
    """Create (201, 409 again, 400 for a bad name), list with a page token, read, update
    (the next version), delete (204, then 404) answer per the spec, never with a value."""
    name = f"openapi-{time.monotonic_ns()}"
    one = "/secrets/{secretID}"
    created = api.post("/secrets", json={"name": name, "value": "v1", "metadata": {"a": "b"}})
    check("POST", "/secrets", created)
    again = api.post("/secrets", json={"name": name, "value": "v"})
    check("POST", "/secrets", again)
    bad = api.post("/secrets", json={"name": "a b", "value": "v"})
    check("POST", "/secrets", bad)
    assert (created.status_code, again.status_code, bad.status_code) == (201, 409, 400)
    second = api.post("/secrets", json={"name": name + "-2", "value": "v"})
    page = api.get("/secrets", params={"limit": 1})
    check("GET", "/secrets", page)
    assert page.status_code == 200 and len(page.json()) == 1 and page.headers["x-next-token"]
    read = api.get(f"/secrets/{name}")
    check("GET", one, read)
    updated = api.post(f"/secrets/{created.json()['secretID']}", json={"value": "v2"})
    check("POST", one, updated)
    assert updated.json()["currentVersion"] == 2 and "v2" not in updated.text
    for sid in (created.json()["secretID"], second.json()["secretID"]):
        gone = api.delete(f"/secrets/{sid}")
        check("DELETE", one, gone)
        assert gone.status_code == 204
    missing = api.get(f"/secrets/{name}")
    check("GET", one, missing)
    assert missing.status_code == 404
