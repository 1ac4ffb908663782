"""An API replica over three node agents, driven by the official e2b SDK: creates are
spread over the nodes, every call and every byte of traffic reaches the sandbox through
its node (the host cannot reach a sandbox's address), pause and resume and network
changes happen on the node, the agents refuse whoever lacks the node token, a node killed
is reported lost and comes back, and a restarted replica takes every sandbox back."""

from __future__ import annotations

import collections
import socket
import subprocess

import httpx
import pytest
from e2b import Sandbox, SandboxState
from multinode import RPC_PORT, TUNNEL_PORT, Cluster, wait_health

pytestmark = pytest.mark.root


def test_creates_are_spread_and_every_call_reaches_its_node(
        cluster: Cluster, sandboxes: list[Sandbox]) -> None:
    cluster.wait_placeable()
    for n in range(6):
        sandboxes.append(Sandbox.create(timeout=120, envs={"WHO": f"s{n}"}, **cluster.opts()))
    placed = cluster.placements()
    nodes = [placed[s.sandbox_id] for s in sandboxes]
    # Spread: every node took some, none most (the same memory each: the one with the
    # most left takes the next; the guess a create is sent on may lag a refresh behind).
    counts = collections.Counter(nodes)
    assert set(counts) == {"node-1", "node-2", "node-3"}, counts
    assert max(counts.values()) <= 3, counts
    for n, sbx in enumerate(sandboxes):
        done = sbx.commands.run("echo $WHO $(hostname)")
        assert done.stdout == f"s{n} {sbx.sandbox_id}\n"
        sbx.files.write("/home/user/mine.txt", sbx.sandbox_id)
        assert sbx.files.read("/home/user/mine.txt") == sbx.sandbox_id
    # What envd ran is in the trace: reported on the node, read by the replica.
    api = httpx.Client(base_url=cluster.replicas[0].url,
                       headers={"X-API-KEY": cluster.keys[0]}, timeout=30)
    with api:
        for sbx in sandboxes:
            _wait_trace(api, sbx.sandbox_id, "echo $WHO $(hostname)")
    # Each node holds its own sandboxes and no other's.
    headers = {"authorization": f"Bearer {cluster.token}"}
    for node in cluster.nodes:
        held = httpx.get(f"http://{node.address}:{RPC_PORT}/v1/sandboxes", headers=headers,
                         timeout=10).json()
        assert {s.sandbox_id for s, at in zip(sandboxes, nodes, strict=True)
                if at == f"node-{node.index}"} <= set(held)
        assert not {s.sandbox_id for s, at in zip(sandboxes, nodes, strict=True)
                    if at != f"node-{node.index}"} & set(held)


def test_the_host_cannot_reach_a_sandbox_but_its_traffic_arrives(
        cluster: Cluster, sandboxes: list[Sandbox]) -> None:
    sbx = Sandbox.create(timeout=120, **cluster.opts())
    sandboxes.append(sbx)
    address = sbx.commands.run("ip -4 -o addr show eth0").stdout.split()[3].split("/")[0]
    # Its address exists on its node only: from the replica's machine nothing answers.
    with pytest.raises(OSError), socket.create_connection((address, 49983), timeout=2):
        pass
    # A server inside, reached through the replica's gateway, the node's tunnel.
    sbx.commands.run("python3 -m http.server 8000 --directory /home/user", background=True)
    sbx.files.write("/home/user/index.html", "served from a node")
    url = f"{cluster.replicas[0].url}/index.html"
    host = f"8000-{sbx.sandbox_id}.localhost"
    for _ in range(200):
        try:
            answer = httpx.get(url, headers={"host": host}, timeout=5)
        except httpx.TransportError:
            continue
        if answer.status_code == 200:
            break
        sbx.commands.run("sleep 0.05")
    assert answer.text == "served from a node"


def test_pause_resume_and_a_network_change_happen_on_the_node(
        cluster: Cluster, sandboxes: list[Sandbox]) -> None:
    sbx = Sandbox.create(timeout=120, **cluster.opts())
    sandboxes.append(sbx)
    sbx.commands.run("sleep 600", background=True)
    sbx.files.write("/home/user/kept.txt", "kept")
    sbx.beta_pause()
    assert Sandbox.get_info(sbx.sandbox_id, **cluster.opts()).state is SandboxState.PAUSED
    back = Sandbox.connect(sbx.sandbox_id, **cluster.opts())
    assert back.files.read("/home/user/kept.txt") == "kept"
    assert "sleep 600" in back.commands.run("ps -eo args").stdout
    # A policy change: answered once the node's firewall took it (its counters come from
    # the node too).
    api = httpx.Client(base_url=cluster.replicas[0].url,
                       headers={"X-API-KEY": cluster.keys[0]}, timeout=30)
    changed = api.put(f"/sandboxes/{sbx.sandbox_id}/network",
                      json={"denyOut": ["0.0.0.0/0"]})
    assert changed.status_code in (200, 204), changed.text
    network = api.get(f"/sandboxes/{sbx.sandbox_id}/network")
    assert network.status_code == 200, network.text
    assert network.json()["denyOut"] == ["0.0.0.0/0"]
    api.close()


def _wait_trace(api: httpx.Client, sandbox_id: str, command: str) -> None:
    for _ in range(400):
        events = api.get(f"/sandboxes/{sandbox_id}/trace",
                         params={"kind": "process"}).json()["events"]
        if any(command in str(e["fields"].get("cmd", "")) for e in events):
            return
        subprocess.run(["sleep", "0.05"], check=True)
    raise AssertionError(f"no process event for {command!r} in {sandbox_id}'s trace: {events}")


def _raw(address: str, port: int, request: bytes) -> bytes:
    with socket.create_connection((address, port), timeout=10) as sock:
        sock.sendall(request)
        return sock.recv(4096)


def test_the_agent_refuses_whoever_lacks_the_node_token(
        cluster: Cluster, sandboxes: list[Sandbox]) -> None:
    sbx = Sandbox.create(timeout=120, **cluster.opts())
    sandboxes.append(sbx)
    node = cluster.nodes[[f"node-{n.index}" for n in cluster.nodes].index(
        cluster.placements()[sbx.sandbox_id])]
    good = f"Proxy-Authorization: Bearer {cluster.token}\r\n".encode()
    wrong = b"Proxy-Authorization: Bearer " + b"x" * 48 + b"\r\n"

    def connect(target: str, auth: bytes) -> bytes:
        return _raw(node.address, TUNNEL_PORT,
                    f"CONNECT {target} HTTP/1.1\r\n".encode() + auth + b"\r\n")

    assert connect(f"{sbx.sandbox_id}:49983", b"").startswith(b"HTTP/1.1 407")
    assert connect(f"{sbx.sandbox_id}:49983", wrong).startswith(b"HTTP/1.1 407")
    assert connect("nosuchsandbox:49983", good).startswith(b"HTTP/1.1 404")
    # Addresses are never a target: a replica reaches sandboxes and nothing else.
    assert connect("127.0.0.1:7070", good).startswith(b"HTTP/1.1 400")
    assert connect(f"{node.address}:22", good).startswith(b"HTTP/1.1 400")
    # The right token and a sandbox of this node: a tunnel, then envd itself answers.
    with socket.create_connection((node.address, TUNNEL_PORT), timeout=10) as sock:
        sock.sendall(f"CONNECT {sbx.sandbox_id}:49983 HTTP/1.1\r\n".encode() + good + b"\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: envd\r\nConnection: close\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 204")
    rpc = f"http://{node.address}:{RPC_PORT}"
    for headers in ({}, {"authorization": "Bearer " + "x" * 48}):
        refused = httpx.post(f"{rpc}/v1/pause-all", json={"sandbox_ids": [sbx.sandbox_id]},
                             headers=headers, timeout=10)
        assert refused.status_code == 401
        assert httpx.delete(f"{rpc}/v1/sandboxes/{sbx.sandbox_id}", headers=headers,
                            timeout=10).status_code == 401
    assert sbx.commands.run("echo still here").stdout == "still here\n"


def test_a_node_killed_is_reported_lost_and_comes_back(
        cluster: Cluster, sandboxes: list[Sandbox], request: pytest.FixtureRequest) -> None:
    placed: dict[str, Sandbox] = {}
    while "node-3" not in placed or len(placed) < 2:
        sbx = Sandbox.create(timeout=300, **cluster.opts())
        sandboxes.append(sbx)
        placed[cluster.placements()[sbx.sandbox_id]] = sbx
    on3 = placed["node-3"]
    elsewhere = next(s for node, s in placed.items() if node != "node-3")
    on3.commands.run("echo before > /home/user/state")
    node = cluster.nodes[2]
    node.kill9()  # the agent only: its sandboxes keep running on the machine
    api = httpx.Client(base_url=cluster.replicas[0].url,
                       headers={"X-API-KEY": cluster.keys[0]}, timeout=30)
    request.addfinalizer(api.close)
    lost = wait_health(api, on3.sandbox_id, "lost")
    assert lost["state"] == "running"
    # The other nodes' sandboxes are unaffected.
    assert api.get(f"/sandboxes/{elsewhere.sandbox_id}").json()["health"] == "healthy"
    assert elsewhere.commands.run("echo fine").stdout == "fine\n"
    events = api.get(f"/sandboxes/{on3.sandbox_id}/trace",
                     params={"kind": "unhealthy"}).json()["events"]
    assert [e["fields"].get("reason") for e in events] == ["node_lost"]
    # A create meanwhile goes to the nodes that answer.
    fresh = Sandbox.create(timeout=120, **cluster.opts())
    sandboxes.append(fresh)
    assert cluster.placements()[fresh.sandbox_id] != "node-3"
    node.start()  # the same node (its id kept), which takes its sandboxes back
    wait_health(api, on3.sandbox_id, "healthy")
    assert on3.commands.run("cat /home/user/state").stdout == "before\n"


def test_an_artefact_promoted_from_a_node_is_read_through_the_other_replica(
        cluster: Cluster, sandboxes: list[Sandbox]) -> None:
    """Promotion reads the sandbox's files through envd, over the node's tunnel (the
    replica cannot reach the sandbox's address); the bytes go to the artefacts dir the
    replicas share, so another replica serves them."""
    sbx = Sandbox.create(timeout=120, **cluster.opts())
    sandboxes.append(sbx)
    sbx.commands.run("head -c 300000 /dev/urandom > /home/user/out.bin")
    wanted = sbx.files.read("/home/user/out.bin", format="bytes")
    headers = {"X-API-KEY": cluster.keys[0]}
    with httpx.Client(base_url=cluster.replicas[0].url, headers=headers, timeout=60) as a, \
            httpx.Client(base_url=cluster.replicas[1].url, headers=headers, timeout=60) as b:
        made = a.post(f"/sandboxes/{sbx.sandbox_id}/artefacts",
                      json={"path": "/home/user/out.bin", "name": "out", "runId": "mn-run"})
        assert made.status_code == 201, made.text
        assert made.json()["sizeBytes"] == len(wanted)
        got = b.get("/artefacts/mn-run/out")
        assert got.status_code == 200, got.text
        assert got.content == bytes(wanted)
        assert b.delete("/artefacts/mn-run/out").status_code == 204


def test_a_volume_is_kept_on_a_node_and_its_sandboxes_run_beside_it(
        cluster: Cluster, sandboxes: list[Sandbox], monkeypatch: pytest.MonkeyPatch) -> None:
    """E2B's volumes over nodes: a volume is kept on one node, every sandbox mounting it
    is placed there (through either replica), and its content API, asked of the other
    replica, is served by that node; a destroyed volume leaves nothing placed."""
    import uuid

    from e2b import Volume

    # The content API through replica 1; the volume API through replica 0.
    monkeypatch.setenv("E2B_VOLUME_API_URL", cluster.replicas[1].url)
    api = {"api_key": cluster.keys[0], "api_url": cluster.replicas[0].url}
    vol = Volume.create(f"mn-{uuid.uuid4().hex[:8]}", **api)
    try:
        kept = cluster.placements()[vol.volume_id]
        vol.write_file("/hello.txt", "from the content api")
        a = Sandbox.create(timeout=120, volume_mounts={"/mnt/v": vol}, **cluster.opts())
        sandboxes.append(a)
        b = Sandbox.create(timeout=120, volume_mounts={"/data": vol.name}, **cluster.opts(1))
        sandboxes.append(b)
        placed = cluster.placements()
        assert placed[a.sandbox_id] == placed[b.sandbox_id] == kept
        assert a.commands.run("cat /mnt/v/hello.txt").stdout == "from the content api"
        a.commands.run("echo from a > /mnt/v/a.txt")
        assert b.commands.run("cat /data/a.txt").stdout == "from a\n"
        assert vol.read_file("/a.txt") == "from a\n"
        assert {e.name for e in vol.list("/")} >= {"hello.txt", "a.txt"}
        a.kill()
        b.kill()
    finally:
        assert Volume.destroy(vol.volume_id, **api)
    assert vol.volume_id not in cluster.placements()


def test_a_restarted_replica_takes_every_sandbox_back(
        cluster: Cluster, sandboxes: list[Sandbox]) -> None:
    for _ in range(3):
        sandboxes.append(Sandbox.create(timeout=300, **cluster.opts()))
    replica = cluster.replicas[0]
    replica.kill9()
    replica.start()
    listed = {s.sandbox_id for s in Sandbox.list(**cluster.opts()).next_items()}
    assert {s.sandbox_id for s in sandboxes} <= listed
    for sbx in sandboxes:
        assert sbx.commands.run("echo back").stdout == "back\n"
