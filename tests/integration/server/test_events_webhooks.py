"""E2B's lifecycle events API and webhooks against a real server: the events of a
sandbox's create, timeout change, pause, resume and kill (driven by the official SDK),
paged, filtered and ordered; webhooks delivered to a real receiver on loopback, signed,
retried after a 500, never sent twice across a restart; private URLs refused; another
team sees and manages none of them."""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from bac_process import ServerProcess, fresh_data_dir, remove_data_dir, running
from e2b import Sandbox
from openapi_check import check
from webhook_receiver import Receiver, e2b_signature, receiving

pytestmark = pytest.mark.root

LIFECYCLE = "sandbox.lifecycle."
FAST_DELIVERY = {
    "BAC_WEBHOOK_ALLOW": "127.0.0.1",  # the receiver; every other private address refused
    "BAC_WEBHOOK_POLL_S": "0.1",
    "BAC_WEBHOOK_BACKOFF_S": "0.2",
    "BAC_WEBHOOK_MAX_BACKOFF_S": "0.5",
    "BAC_WEBHOOKS_PER_TEAM": "4",
}
SECRET = "s3cret-for-signatures"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with running("events", **FAST_DELIVERY) as srv:
        srv.create_key("alpha")
        srv.create_key("beta")
        yield srv


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with receiving() as found:
        yield found


def _client(server: ServerProcess, key: int) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"X-API-KEY": server.keys[key]},
                        timeout=60)


@pytest.fixture
def alpha(server: ServerProcess) -> Iterator[httpx.Client]:
    with _client(server, 0) as client:
        yield client


@pytest.fixture
def beta(server: ServerProcess) -> Iterator[httpx.Client]:
    with _client(server, 1) as client:
        yield client


def _sdk(server: ServerProcess, key: int = 0) -> dict[str, str]:
    return {"api_key": server.keys[key], "api_url": server.url, "sandbox_url": server.url}


def _eventually(check: Callable[[], Any], what: str, bound_s: float = 30.0) -> Any:
    """``check()``'s first truthy answer; polls the API (nothing announces a write in
    the server's store across the process boundary), bounded."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"not in {bound_s}s: {what}")


def _webhook(client: httpx.Client, url: str, events: list[str], **extra: Any) -> dict[str, Any]:
    answer = client.post("/events/webhooks", json={
        "name": "tests", "url": url, "enabled": True, "events": events,
        "signatureSecret": SECRET, **extra})
    assert answer.status_code == 201, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"].removeprefix(LIFECYCLE) for e in events]


def test_events_of_a_sandbox_paged_filtered_and_ordered(
        server: ServerProcess, alpha: httpx.Client, beta: httpx.Client) -> None:
    """create, set_timeout, a snapshot, pause, resume (connect) and kill each leave one event of
    E2B's type and shape; offset/limit page them, orderAsc orders them, types filters
    them; the team route lists them too; another team's view has none of them."""
    sbx = Sandbox.create(timeout=120, metadata={"run": "events-1"}, **_sdk(server))
    sbx.set_timeout(200)
    snapshot = sbx.create_snapshot()
    assert sbx.pause() is True
    Sandbox.connect(sbx.sandbox_id, **_sdk(server)).kill()
    assert Sandbox.delete_snapshot(snapshot.snapshot_id, **_sdk(server))
    route = f"/events/sandboxes/{sbx.sandbox_id}"

    listed = alpha.get(route, params={"orderAsc": "true", "limit": 100})
    assert listed.status_code == 200, listed.text
    events = listed.json()
    assert _types(events) == ["created", "updated", "checkpointed", "paused", "resumed",
                              "killed"]
    created, paused, killed = events[0], events[3], events[5]
    assert created["sandboxId"] == sbx.sandbox_id
    assert created["sandboxTemplateId"] == "base"
    assert created["sandboxBuildId"] == ""  # a built-in template has no build
    assert created["eventCategory"] == "lifecycle" and created["eventLabel"] == "create"
    assert created["eventData"]["sandbox_metadata"] == {"run": "events-1"}
    assert created["timestamp"].endswith("Z") and created["version"] == "v2"
    assert len({e["id"] for e in events}) == 6
    assert len({e["sandboxExecutionId"] for e in events}) == 1
    assert {e["sandboxTeamId"] for e in events} == {created["sandboxTeamId"]}
    for with_execution in (paused, killed):
        execution = with_execution["eventData"]["execution"]
        assert execution["vcpu_count"] >= 1 and execution["memory_mb"] >= 128
        assert execution["execution_time"] >= 0
    assert "execution" not in created["eventData"]

    newest_first = alpha.get(route, params={"limit": 100}).json()
    assert newest_first == list(reversed(events))  # orderAsc defaults to false
    assert alpha.get(route).json() == newest_first[:10]  # limit defaults to 10
    pages = [alpha.get(route, params={"orderAsc": "true", "limit": 4, "offset": n}).json()
             for n in (0, 4, 8)]
    assert [e for page in pages for e in page] == events
    assert [len(p) for p in pages] == [4, 2, 0]
    picked = alpha.get(route, params=[("types", LIFECYCLE + "paused"),
                                      ("types", LIFECYCLE + "killed"),
                                      ("orderAsc", "true")]).json()
    assert picked == [paused, killed]

    team_wide = alpha.get("/events/sandboxes", params={"limit": 100}).json()
    assert [e for e in team_wide if e["sandboxId"] == sbx.sandbox_id] == newest_first

    assert beta.get(route).status_code == 404
    assert beta.get(route).json()["code"] == 404
    assert all(e["sandboxId"] != sbx.sandbox_id
               for e in beta.get("/events/sandboxes", params={"limit": 100}).json())


@pytest.mark.parametrize(("params", "names"), [
    ({"limit": "0"}, "limit"),
    ({"limit": "101"}, "limit"),
    ({"limit": "ten"}, "limit"),
    ({"offset": "-1"}, "offset"),
    ({"orderAsc": "yes"}, "orderAsc"),
    ({"types": "sandbox.lifecycle.exploded"}, "types"),
])
def test_bad_event_queries_are_400_json(alpha: httpx.Client, params: dict[str, str],
                                        names: str) -> None:
    for route in ("/events/sandboxes", "/events/sandboxes/nosuch"):
        answer = alpha.get(route, params=params)
        assert answer.status_code == 400, (route, answer.text)
        assert answer.json()["code"] == 400 and names in answer.json()["message"]


def test_webhook_delivered_signed_and_logged(
        server: ServerProcess, alpha: httpx.Client, receiver: Receiver) -> None:
    """A created and a killed event reach the receiver, each signed as E2B documents
    (checked here with an independent computation), with E2B's headers; the delivery log
    says each succeeded at the first attempt; the secret is never answered back."""
    hook = _webhook(alpha, receiver.url("/signed"),
                    [LIFECYCLE + "created", LIFECYCLE + "killed"])
    assert "signatureSecret" not in hook and SECRET not in str(hook)
    sbx = Sandbox.create(timeout=60, **_sdk(server))
    sbx.kill()
    arrivals = [a for a in receiver.until(
        lambda a: a.path == "/signed" and a.json()["type"] == LIFECYCLE + "killed"
        and a.json()["sandboxId"] == sbx.sandbox_id) if a.path == "/signed"]
    ours = [a for a in arrivals if a.json()["sandboxId"] == sbx.sandbox_id]
    assert [a.json()["type"] for a in ours] == [LIFECYCLE + "created", LIFECYCLE + "killed"]
    for arrival in ours:
        assert arrival.headers["e2b-signature"] == e2b_signature(SECRET, arrival.body)
        assert arrival.headers["e2b-signature"] != e2b_signature("other", arrival.body)
        assert arrival.headers["e2b-webhook-id"] == hook["id"]
        assert arrival.headers["e2b-signature-version"] == "v1"
        assert arrival.headers["content-type"] == "application/json"
    listed_events = alpha.get(f"/events/sandboxes/{sbx.sandbox_id}",
                              params={"orderAsc": "true"}).json()
    assert ours[0].json() == listed_events[0]  # the payload is the API's event

    def logged() -> list[dict[str, Any]]:
        found = alpha.get(f"/events/webhooks/{hook['id']}/deliveries",
                          params={"orderAsc": "true"}).json()
        return found if found and all(d["status"] == "success" for d in found) else []

    deliveries = _eventually(logged, "both deliveries logged as successes")
    assert [(d["eventType"], d["attempts"], d["responseCode"]) for d in deliveries] == [
        (LIFECYCLE + "created", 1, 200), (LIFECYCLE + "killed", 1, 200)]
    assert {d["id"] for d in deliveries} == {a.headers["e2b-delivery-id"] for a in ours}
    one = alpha.get(f"/events/webhooks/{hook['id']}/deliveries/{deliveries[0]['id']}").json()
    assert one["payload"] == ours[0].json()
    stats = alpha.get(f"/events/webhooks/{hook['id']}/stats").json()
    assert (stats["total"], stats["success"], stats["failed"]) == (2, 2, 0)
    assert alpha.delete(f"/events/webhooks/{hook['id']}").status_code == 204


def test_webhook_retried_after_500(server: ServerProcess, alpha: httpx.Client,
                                   receiver: Receiver) -> None:
    """The receiver answers 500, then 503, then 200: the same delivery (same id and
    body) arrives three times and is logged a success at the third attempt."""
    receiver.answer("/flaky", 500, 503)
    hook = _webhook(alpha, receiver.url("/flaky"), [LIFECYCLE + "created"])
    sbx = Sandbox.create(timeout=60, **_sdk(server))
    try:
        arrivals = [a for a in receiver.until(lambda a: a.path == "/flaky" and a.status == 200)
                    if a.path == "/flaky"]
    finally:
        sbx.kill()
    assert [a.status for a in arrivals] == [500, 503, 200]
    assert len({a.headers["e2b-delivery-id"] for a in arrivals}) == 1
    assert len({a.body for a in arrivals}) == 1
    assert arrivals[0].json()["sandboxId"] == sbx.sandbox_id

    def succeeded() -> dict[str, Any] | None:
        found = alpha.get(f"/events/webhooks/{hook['id']}/deliveries").json()
        return found[0] if found and found[0]["status"] == "success" else None

    delivery = _eventually(succeeded, "the delivery logged a success")
    assert (delivery["attempts"], delivery["responseCode"]) == (3, 200)
    assert alpha.delete(f"/events/webhooks/{hook['id']}").status_code == 204


def _listener(host: str) -> tuple[socket.socket, threading.Event]:
    """A TCP listener that records whether anything connected to it."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.bind((host, 0))
    sock.listen()
    sock.settimeout(0.2)
    touched = threading.Event()

    def watch() -> None:
        with contextlib.suppress(OSError):
            while True:
                try:
                    conn, _ = sock.accept()
                except TimeoutError:
                    continue
                touched.set()
                conn.close()

    threading.Thread(target=watch, daemon=True).start()
    return sock, touched


def test_private_urls_refused(alpha: httpx.Client) -> None:
    """A webhook may not point at this machine or a private network (only the address
    the operator allowed): each is a 400 naming the refusal, and a listener on a
    loopback address that is not allowed is never connected to."""
    sock, touched = _listener("127.0.0.2")
    try:
        port = sock.getsockname()[1]
        for url in (f"http://127.0.0.2:{port}/x", f"http://[::ffff:127.0.0.2]:{port}/x",
                    "http://10.1.2.3/x", "http://192.168.0.1/x", "http://172.16.5.5/x",
                    "http://169.254.169.254/latest/meta-data", "http://[::1]:80/x",
                    "http://100.64.0.1/x", "http://0.0.0.0:80/x"):
            answer = alpha.post("/events/webhooks", json={
                "url": url, "events": [LIFECYCLE + "created"], "signatureSecret": SECRET})
            assert answer.status_code == 400, (url, answer.text)
            assert "refused" in answer.json()["message"], url
        for url in ("file:///etc/passwd", "ftp://example.com/", "http://user:pw@127.0.0.1/",
                    "not a url", "http:///nohost"):
            answer = alpha.post("/events/webhooks", json={
                "url": url, "events": [LIFECYCLE + "created"], "signatureSecret": SECRET})
            assert answer.status_code == 400, (url, answer.text)
        hook = _webhook(alpha, f"http://127.0.0.1:{port}/allowed", [LIFECYCLE + "created"])
        moved = alpha.patch(f"/events/webhooks/{hook['id']}",
                            json={"url": f"http://127.0.0.2:{port}/x"})
        assert moved.status_code == 400 and "refused" in moved.json()["message"]
        assert alpha.get(f"/events/webhooks/{hook['id']}").json()["url"].endswith("/allowed")
        assert alpha.delete(f"/events/webhooks/{hook['id']}").status_code == 204
        assert not touched.is_set()
    finally:
        sock.close()


def test_webhook_bad_input(alpha: httpx.Client, receiver: Receiver) -> None:
    base = {"url": receiver.url("/bad"), "events": [LIFECYCLE + "created"],
            "signatureSecret": SECRET}
    for body, needle in (
            ({**base, "events": ["sandbox.lifecycle.exploded"]}, "exploded"),
            ({**base, "events": []}, "events"),
            ({**base, "signatureSecret": ""}, "signatureSecret"),
            ({k: v for k, v in base.items() if k != "signatureSecret"}, "signatureSecret"),
            ({**base, "enabled": "yes"}, "enabled"),
            ({**base, "surprise": 1}, "surprise"),
            ({**base, "name": "x" * 300}, "name")):
        answer = alpha.post("/events/webhooks", json=body)
        assert answer.status_code == 400, (body, answer.text)
        assert answer.json()["code"] == 400 and needle in answer.json()["message"]
    made = [_webhook(alpha, receiver.url(f"/n{i}"), [LIFECYCLE + "created"])
            for i in range(4)]
    over = alpha.post("/events/webhooks", json=base)
    assert over.status_code == 400 and "4 webhooks" in over.json()["message"]
    for hook in made:
        assert alpha.delete(f"/events/webhooks/{hook['id']}").status_code == 204


def test_another_team_cannot_see_or_manage_a_webhook(
        alpha: httpx.Client, beta: httpx.Client, receiver: Receiver) -> None:
    hook = _webhook(alpha, receiver.url("/mine"), [LIFECYCLE + "created"])
    route = f"/events/webhooks/{hook['id']}"
    try:
        assert all(w["id"] != hook["id"] for w in beta.get("/events/webhooks").json())
        for method, path, kwargs in (
                ("GET", route, {}), ("PATCH", route, {"json": {"enabled": False}}),
                ("DELETE", route, {}), ("GET", route + "/deliveries", {}),
                ("GET", route + "/stats", {})):
            answer = beta.request(method, path, **kwargs)
            assert answer.status_code == 404, (method, path, answer.text)
            assert answer.json()["code"] == 404
        mine = alpha.get(route).json()
        assert mine["enabled"] is True and mine["url"] == receiver.url("/mine")
        assert [w["id"] for w in alpha.get("/events/webhooks").json()] == [hook["id"]]
    finally:
        assert alpha.delete(route).status_code == 204


def test_no_duplicate_or_loss_across_a_restart(receiver: Receiver) -> None:
    """A delivered event is not sent again after the server is killed and started again,
    and an event that happened while no server ran is delivered after the start."""
    srv = ServerProcess(fresh_data_dir("events-restart"), extra_env=dict(FAST_DELIVERY))
    srv.start()
    try:
        srv.create_key("restart")
        with _client(srv, 0) as client:
            hook = _webhook(client, receiver.url("/restart"),
                            [LIFECYCLE + "created", LIFECYCLE + "killed"])

            def delivered(count: int) -> Callable[[], bool]:
                def check() -> bool:
                    found = client.get(f"/events/webhooks/{hook['id']}/deliveries").json()
                    return len(found) == count and all(d["status"] == "success"
                                                       for d in found)
                return check

            first = Sandbox.create(timeout=120, **_sdk(srv))
            seen = receiver.until(lambda a: a.path == "/restart")
            _eventually(delivered(1), "the created event logged as delivered")
            srv.kill9()
            srv.start()
            first.kill()  # its event is owed and sent by the new process
            second = Sandbox.create(timeout=60, **_sdk(srv))
            second.kill()
            _eventually(delivered(4), "all four events logged as delivered")
            srv.kill9()
            srv.start()
            third = Sandbox.create(timeout=60, **_sdk(srv))
            third.kill()
            _eventually(delivered(6), "the events after the second restart delivered")
        with contextlib.suppress(queue.Empty):
            while True:
                seen.append(receiver.arrivals.get_nowait())
        got = [a for a in seen if a.path == "/restart"]
        ids = [a.json()["id"] for a in got]
        assert len(ids) == len(set(ids)) == 6, [a.json()["type"] for a in got]
    finally:
        with contextlib.suppress(httpx.TransportError):
            srv.kill_all_sandboxes()
        srv.stop()
    remove_data_dir(srv)


def test_responses_conform_to_the_spec(server: ServerProcess, alpha: httpx.Client,
                                       receiver: Receiver) -> None:
    """Every events and webhooks operation answers what spec/openapi.yaml says, on
    success and on error."""
    sbx = Sandbox.create(timeout=60, metadata={"k": "v"}, **_sdk(server))
    hook_made = alpha.post("/events/webhooks", json={
        "name": "spec", "url": receiver.url("/spec"), "events": [LIFECYCLE + "killed"],
        "signatureSecret": SECRET})
    check("POST", "/events/webhooks", hook_made)
    hook = hook_made.json()["id"]
    sbx.kill()
    receiver.until(lambda a: a.path == "/spec")
    _eventually(lambda: alpha.get(f"/events/webhooks/{hook}/deliveries").json(),
                "the delivery logged")
    delivery = alpha.get(f"/events/webhooks/{hook}/deliveries").json()[0]["id"]
    w = "/events/webhooks/{webhookID}"
    calls = [
        ("GET", "/events/sandboxes", "/events/sandboxes", {"params": {"limit": 3}}),
        ("GET", "/events/sandboxes/{sandboxID}", f"/events/sandboxes/{sbx.sandbox_id}", {}),
        ("GET", "/events/sandboxes/{sandboxID}", "/events/sandboxes/nosuch", {}),
        ("GET", "/events/sandboxes", "/events/sandboxes", {"params": {"limit": 0}}),
        ("GET", "/events/webhooks", "/events/webhooks", {}),
        ("GET", w, f"/events/webhooks/{hook}", {}),
        ("PATCH", w, f"/events/webhooks/{hook}", {"json": {"enabled": False}}),
        ("PATCH", w, f"/events/webhooks/{hook}", {"json": {"events": []}}),
        ("GET", w + "/deliveries", f"/events/webhooks/{hook}/deliveries",
         {"params": {"limit": 1}}),
        ("GET", w + "/deliveries", f"/events/webhooks/{hook}/deliveries",
         {"params": {"cursor": "x"}}),
        ("GET", w + "/deliveries/{deliveryID}",
         f"/events/webhooks/{hook}/deliveries/{delivery}", {}),
        ("GET", w + "/deliveries/{deliveryID}", f"/events/webhooks/{hook}/deliveries/nosuch",
         {}),
        ("GET", w + "/stats", f"/events/webhooks/{hook}/stats", {}),
        ("POST", "/events/webhooks", "/events/webhooks", {"json": {"url": "x"}}),
        ("DELETE", w, f"/events/webhooks/{hook}", {}),
        ("GET", w, f"/events/webhooks/{hook}", {}),
    ]
    statuses = []
    for method, template, path, kwargs in calls:
        response = alpha.request(method, path, **kwargs)
        check(method, template, response)
        statuses.append(response.status_code)
    assert statuses == [200, 200, 404, 400, 200, 200, 200, 400, 200, 400, 200, 404, 200, 400,
                        204, 404]
    anonymous = httpx.get(server.url + "/events/webhooks")
    check("GET", "/events/webhooks", anonymous)
    assert anonymous.status_code == 401
