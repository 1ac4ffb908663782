"""Two API replicas over the same nodes and database, driven by the official e2b SDK: a
sandbox made through one is driven, paused, resumed and killed through the other, each
seeing the other's changes; a timeout fires once, in the leader, wherever it was set;
the leadership moves when its replica dies, its timers with it; and a replica killed in
the middle of creates loses nothing: every sandbox a client got answers through the
other, and none is left on a node that no record claims."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import httpx
import pytest
from bac_process import ServerProcess
from e2b import Sandbox, SandboxState
from multinode import RPC_PORT, Cluster, until
from playwright.sync_api import expect, sync_playwright

pytestmark = pytest.mark.root


def _opts(cluster: Cluster, replica: int) -> dict[str, str]:
    url = cluster.replicas[replica].url
    return {"api_key": cluster.keys[0], "api_url": url, "sandbox_url": url}


def _api(cluster: Cluster, replica: int) -> httpx.Client:
    return httpx.Client(base_url=cluster.replicas[replica].url,
                        headers={"X-API-KEY": cluster.keys[0]}, timeout=30)


def _state(api: httpx.Client, sandbox_id: str) -> str | None:
    answer = api.get(f"/sandboxes/{sandbox_id}")
    return None if answer.status_code == 404 else str(answer.json()["state"])


def test_a_sandbox_made_through_one_replica_is_driven_through_the_other(
        cluster: Cluster, sandboxes: list[Sandbox]) -> None:
    made = Sandbox.create(timeout=120, envs={"WHERE": "a"}, **_opts(cluster, 0))
    sandboxes.append(made)
    with _api(cluster, 0) as a, _api(cluster, 1) as b:
        until("b knows the sandbox", lambda: _state(b, made.sandbox_id) == "running")
        other = Sandbox.connect(made.sandbox_id, **_opts(cluster, 1))
        assert other.commands.run("echo $WHERE").stdout == "a\n"
        other.files.write("/home/user/from-b.txt", "b wrote this")
        assert made.files.read("/home/user/from-b.txt") == "b wrote this"
        other.set_timeout(300)
        until("a sees b's timeout", lambda: a.get(f"/sandboxes/{made.sandbox_id}").json()
               ["endAt"] == b.get(f"/sandboxes/{made.sandbox_id}").json()["endAt"])
        # Paused through b: a sees it paused; resumed through a: b routes to it again.
        other.beta_pause()
        until("a sees it paused", lambda: _state(a, made.sandbox_id) == "paused")
        assert Sandbox.get_info(made.sandbox_id, **_opts(cluster, 0)).state \
            is SandboxState.PAUSED
        back = Sandbox.connect(made.sandbox_id, **_opts(cluster, 0))
        assert back.files.read("/home/user/from-b.txt") == "b wrote this"
        until("b sees it running", lambda: _state(b, made.sandbox_id) == "running")
        assert other.commands.run("echo again").stdout == "again\n"
        # Killed through b: gone from a too.
        other.kill()
        until("a forgets it", lambda: _state(a, made.sandbox_id) is None)
        listed = a.get("/v2/sandboxes").json()
        assert made.sandbox_id not in {s["sandboxID"] for s in listed}


def test_a_sandbox_is_driven_through_the_other_replica_the_instant_it_is_made(
        cluster: Cluster, sandboxes: list[Sandbox]) -> None:
    """No waiting for the other replica to hear of it (a client behind a load balancer
    goes wherever it is sent): made through a, its envd traffic, its API calls and its
    signed URLs go through b at once; paused and resumed through a, its traffic through b
    reaches it at once; paused through a with auto-resume, its traffic through b resumes
    it."""
    split = {"api_key": cluster.keys[0], "api_url": cluster.replicas[0].url,
             "sandbox_url": cluster.replicas[1].url}
    for n in range(4):
        traffic = Sandbox.create(timeout=120, envs={"N": str(n)}, **split)
        sandboxes.append(traffic)
        assert traffic.commands.run("echo $N").stdout == f"{n}\n"
        api = Sandbox.create(timeout=120, **_opts(cluster, 0))
        sandboxes.append(api)
        assert Sandbox.get_info(api.sandbox_id, **_opts(cluster, 1)).state \
            is SandboxState.RUNNING
        Sandbox.set_timeout(api.sandbox_id, 300, **_opts(cluster, 1))
        traffic.beta_pause()  # through a
        Sandbox.connect(traffic.sandbox_id, **_opts(cluster, 0))
        assert traffic.commands.run("echo back").stdout == "back\n"  # through b
        # Paused through a with auto-resume: its next envd call, through b, resumes it.
        auto = Sandbox.create(timeout=120, lifecycle={"on_timeout": "pause",
                                                      "auto_resume": True}, **split)
        sandboxes.append(auto)
        auto.files.write("/home/user/kept.txt", f"kept {n}")
        auto.beta_pause()
        assert auto.files.read("/home/user/kept.txt") == f"kept {n}"
        assert auto.get_info().state is SandboxState.RUNNING
        # A signed URL names no sandbox: b finds the one a has just made.
        signed = Sandbox.create(timeout=120, secure=True, **split)
        sandboxes.append(signed)
        done = httpx.post(signed.upload_url("/home/user/s.txt"),
                          files={"file": ("s.txt", b"signed")}, timeout=30)
        assert done.status_code == 200, done.text


def _leads(replica: ServerProcess) -> bool:
    if replica.proc is None or replica.proc.poll() is not None:
        return False
    return bool(httpx.get(f"{replica.url}/health", timeout=10).json().get("leader"))


def _leader(cluster: Cluster) -> int:
    found: list[int] = []

    def one() -> bool:
        found[:] = [n for n, r in enumerate(cluster.replicas) if _leads(r)]
        return len(found) == 1

    until("exactly one replica leads", one)
    return found[0]


def _events(api: httpx.Client, sandbox_id: str, kind: str) -> list[dict[str, object]]:
    found: list[dict[str, object]] = api.get(f"/sandboxes/{sandbox_id}/trace",
                                             params={"kind": kind}).json()["events"]
    return found


def test_a_timeout_fires_once_and_moves_with_the_leadership(
        cluster: Cluster, sandboxes: list[Sandbox]) -> None:
    leader = _leader(cluster)
    follower = 1 - leader
    # Set through the follower; it ends through the leader's timer.
    short = Sandbox.create(timeout=3, **_opts(cluster, follower))
    sandboxes.append(short)
    with _api(cluster, follower) as api:
        until("the timeout ends it", lambda: _state(api, short.sandbox_id) is None, 400)
        assert len(_events(api, short.sandbox_id, "timeout")) == 1
    # The leader dies: the other replica takes the lock and the timers.
    later = Sandbox.create(timeout=8, **_opts(cluster, follower))
    sandboxes.append(later)
    dead = cluster.replicas[leader]
    dead.kill9()
    try:
        until("the follower leads", lambda: _leads(cluster.replicas[follower]), 400)
        with _api(cluster, follower) as api:
            until("the new leader's timer ends it",
                   lambda: _state(api, later.sandbox_id) is None, 400)
            assert len(_events(api, later.sandbox_id, "timeout")) == 1
    finally:
        dead.start()


def test_a_schedule_set_through_a_follower_runs_in_the_leader(
        cluster: Cluster, sandboxes: list[Sandbox]) -> None:
    """Scheduled checkpoints run in the leader only, whichever replica set them: the
    follower that took the schedule is killed at once, and checkpoints still come."""
    leader = _leader(cluster)
    follower = 1 - leader
    sbx = Sandbox.create(timeout=300, **_opts(cluster, leader))
    sandboxes.append(sbx)
    with _api(cluster, follower) as f:
        until("the follower knows the sandbox",
               lambda: _state(f, sbx.sandbox_id) == "running")
        put = f.put(f"/sandboxes/{sbx.sandbox_id}/checkpoints/schedule",
                    json={"intervalSeconds": 2, "keep": 100})
        assert put.status_code == 204, put.text
    cluster.replicas[follower].kill9()
    try:
        with _api(cluster, leader) as a:
            def autos() -> int:
                found = a.get(f"/sandboxes/{sbx.sandbox_id}/checkpoints").json()
                return len([c for c in found if str(c.get("name", "")).startswith("auto-")])

            until("two scheduled checkpoints, taken by the leader", lambda: autos() >= 2,
                   bound=400)
            # Stopped through the leader: none after.
            put = a.put(f"/sandboxes/{sbx.sandbox_id}/checkpoints/schedule",
                        json={"intervalSeconds": None})
            assert put.status_code == 204, put.text
    finally:
        cluster.replicas[follower].start()


def test_mission_control_on_a_follower_shows_a_sandboxs_live_figures(
        cluster: Cluster, sandboxes: list[Sandbox]) -> None:
    """Each replica samples its running sandboxes for Mission Control (the leader alone
    stores the samples): a sandbox's page on a follower shows its CPU and memory."""
    chromium = Path("/usr/bin/chromium")
    if not chromium.exists():
        pytest.skip(f"{chromium} is missing (scripts/setup-host.sh installs chromium)")
    follower = 1 - _leader(cluster)
    sbx = Sandbox.create(timeout=120, **_opts(cluster, 1 - follower))
    sandboxes.append(sbx)
    base = cluster.replicas[follower].url
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(chromium),
            args=["--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update"])
        try:
            page = browser.new_page()
            page.goto(base + "/ui/")
            page.fill("#credential", cluster.keys[0])
            page.click("#signin")
            expect(page.locator("#who")).to_be_visible()
            now = page.locator("div", has=page.locator("b", has_text="Now"))

            def shown() -> bool:
                page.goto(f"{base}/ui/sandboxes/{sbx.sandbox_id}")
                return "CPU" in now.last.inner_text()

            until("the follower's page shows the sandbox's figures", shown, bound=100)
        finally:
            browser.close()


def test_a_pause_and_a_kill_through_two_replicas_at_once_end_killed(
        cluster: Cluster, sandboxes: list[Sandbox]) -> None:
    """Steps on one sandbox through two replicas take turns (a lease in the store): a
    pause through one and a kill through the other, sent together, always end with the
    sandbox killed everywhere: never a row left paused over a sandbox its node destroyed."""
    for _ in range(3):
        sbx = Sandbox.create(timeout=120, **_opts(cluster, 0))
        sandboxes.append(sbx)
        with _api(cluster, 0) as a, _api(cluster, 1) as b:
            sid = sbx.sandbox_id
            until("b knows the sandbox", lambda sid=sid: _state(b, sid) == "running")
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                paused = pool.submit(a.post, f"/sandboxes/{sbx.sandbox_id}/pause")
                killed = pool.submit(b.delete, f"/sandboxes/{sbx.sandbox_id}")
                assert paused.result().status_code in (204, 404, 409), paused.result().text
                assert killed.result().status_code == 204, killed.result().text
            for api in (a, b):
                until("the sandbox is gone for both replicas",
                       lambda api=api, sid=sid: _state(api, sid) is None)
        assert sbx.sandbox_id not in _held(cluster)


def test_a_replica_killed_in_the_middle_of_creates_loses_nothing(
        cluster: Cluster, sandboxes: list[Sandbox]) -> None:
    victim, survivor = cluster.replicas[0], 1
    made: list[Sandbox] = []
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(Sandbox.create, timeout=300, **_opts(cluster, 0))
                   for _ in range(8)]
        # Killed once the first create has answered: the others are in flight.
        concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_COMPLETED)
        victim.kill9()
        for future in futures:
            try:
                made.append(future.result())
            except Exception:
                pass  # cut off: never handed to anybody
    sandboxes.extend(made)
    assert made
    try:
        with _api(cluster, survivor) as api:
            # Every sandbox a client got answers through the other replica.
            for sbx in made:
                until(f"{sbx.sandbox_id} is known",
                       lambda s=sbx: _state(api, s.sandbox_id) == "running")
                again = Sandbox.connect(sbx.sandbox_id, **_opts(cluster, survivor))
                assert again.commands.run("echo alive").stdout == "alive\n"
            # And no node keeps a sandbox that no live record claims (the leader's sweep).
            until("the nodes hold only recorded sandboxes",
                   lambda: _held(cluster) <= _recorded(api), 600)
    finally:
        victim.start()
        with _api(cluster, survivor) as api:
            for item in api.get("/v2/sandboxes").json():
                api.delete(f"/sandboxes/{item['sandboxID']}")


def _held(cluster: Cluster) -> set[str]:
    headers = {"authorization": f"Bearer {cluster.token}"}
    held: set[str] = set()
    for node in cluster.nodes:
        held |= set(httpx.get(f"http://{node.address}:{RPC_PORT}/v1/sandboxes",
                              headers=headers, timeout=10).json())
    return held


def _recorded(api: httpx.Client) -> set[str]:
    return {s["sandboxID"] for s in api.get("/v2/sandboxes").json()}


def test_both_replicas_list_the_same_fleet(cluster: Cluster,
                                          sandboxes: list[Sandbox]) -> None:
    for n in range(4):
        sandboxes.append(Sandbox.create(timeout=120, **_opts(cluster, n % 2)))
    ids = {s.sandbox_id for s in sandboxes}
    with _api(cluster, 0) as a, _api(cluster, 1) as b:
        until("both list them", lambda: ids <= _recorded(a) and ids <= _recorded(b))
    # One of them leads, and says so; the other says it does not.
    assert sorted(_leads(r) for r in cluster.replicas) == [False, True]


def test_a_build_context_linked_by_one_replica_is_taken_by_another(
        cluster: Cluster, sandboxes: list[Sandbox]) -> None:
    """Upload links are signed alike by every replica (a key derived from the shared store
    key): the link asked of one is taken by the other, as behind a load balancer; the
    build then runs on a node and a sandbox of it has the file."""
    import hashlib
    import io
    import tarfile
    import uuid

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size, info.mode = 13, 0o644
        tar.addfile(info, io.BytesIO(b"from a node\n\n"))
    files_hash = hashlib.sha256(uuid.uuid4().bytes).hexdigest()
    with _api(cluster, 0) as a, _api(cluster, 1) as b:
        requested = a.post("/v3/templates", json={"name": f"mn-{uuid.uuid4().hex[:8]}"})
        assert requested.status_code == 202, requested.text
        template_id, build_id = requested.json()["templateID"], requested.json()["buildID"]
        link = a.get(f"/templates/{template_id}/files/{files_hash}")
        assert link.status_code == 201 and link.json()["present"] is False, link.text
        url = link.json()["url"].replace(cluster.replicas[0].url, cluster.replicas[1].url)
        assert url.startswith(cluster.replicas[1].url)
        put = httpx.put(url, content=buffer.getvalue(), timeout=60)
        assert put.status_code == 201, put.text
        started = b.post(f"/v2/templates/{template_id}/builds/{build_id}", json={
            "fromTemplate": "base",
            "steps": [{"type": "COPY", "args": ["hello.txt", "/home/user/hello.txt"],
                       "filesHash": files_hash, "force": False}]})
        assert started.status_code == 202, started.text
        finished: dict[str, object] = {}

        def done() -> bool:
            finished.update(b.get(f"/templates/{template_id}/builds/{build_id}/status",
                                  params={"limit": 0}).json())
            return finished["status"] in ("ready", "error")

        until("the build ends", done, 3600)
        assert finished["status"] == "ready", finished
    sbx = Sandbox.create(template_id, timeout=60, **_opts(cluster, 0))
    sandboxes.append(sbx)
    assert sbx.files.read("/home/user/hello.txt") == "from a node\n\n"


def test_a_cap_made_through_a_follower_is_enforced_by_the_leader(
        cluster: Cluster, sandboxes: list[Sandbox]) -> None:
    """The leader meters and acts; a cap made through the other replica reaches it (the
    caps are read again every 2 s) and kills the sandbox it covers once spent; both
    replicas show the cap."""
    leader = _leader(cluster)
    follower = 1 - leader
    sbx = Sandbox.create(timeout=300, **_opts(cluster, follower))
    sandboxes.append(sbx)
    with _api(cluster, follower) as f, _api(cluster, leader) as lead:
        made = f.post("/caps", json={"scope": "sandbox", "sandboxID": sbx.sandbox_id,
                                     "limit": 0.000001, "action": "kill"})
        assert made.status_code == 201, made.text
        cap_id = made.json()["capID"]
        until("the leader ends it", lambda: _state(lead, sbx.sandbox_id) is None, 400)
        killed = _events(lead, sbx.sandbox_id, "killed")
        assert [e["fields"].get("reason") for e in killed] == ["cap"]  # type: ignore[union-attr]
        until("the follower shows the cap reached",
               lambda: f.get(f"/caps/{cap_id}").json()["state"] == "reached", 200)
        assert lead.get(f"/caps/{cap_id}").json()["state"] == "reached"
        assert f.delete(f"/caps/{cap_id}").status_code == 204
        until("the leader forgets it",
               lambda: lead.get(f"/caps/{cap_id}").status_code == 404, 200)
