"""Several machines on this one: node agents each in a network namespace of its own, API
replicas on the host, one PostgreSQL (docs/scale-out.md, *Tests*).

Each node is a network namespace (``ip netns``) with a veth to its cluster's bridge on
the host, an address of its own on that bridge's network, and its own data dir; its agent runs there
(``nsenter --net``: only the network namespace changes, so it shares the host's cgroups,
mounts and /run as a node on a machine of its own would have its own), so its sandboxes'
veths, its nftables tables and its listening sockets are the namespace's. API replicas run
on the host and reach the nodes over the bridge, as they would over a network. Every
process shares the store's key file and the node token, as a deployment's do.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from bac_process import (
    TEMPLATES_DIR,
    ServerProcess,
    fresh_data_dir,
    kill9,
    log_tail,
    spawn,
    stop,
    wait_ready,
)

# Each cluster has a bridge ``bacmn<n>`` and the network 10.231.<n>.0/24 (the bridge is .1,
# node i is .(10 + i)), n the first free: clusters of one test session coexist.
RPC_PORT = 7070
TUNNEL_PORT = 7071


def _ip(*argv: str, check: bool = True) -> None:
    subprocess.run(["ip", *argv], check=check, capture_output=True)


@dataclass
class Node:
    index: int
    data_dir: Path
    env: dict[str, str]
    net: int = 0  # its cluster's number
    proc: subprocess.Popen[bytes] | None = None

    @property
    def netns(self) -> str:
        return f"bacmn{self.net}-{self.index}"

    @property
    def veth(self) -> str:
        return f"bacmn{self.net}h{self.index}"

    @property
    def address(self) -> str:
        return f"10.231.{self.net}.{10 + self.index}"

    @property
    def log(self) -> Path:
        return self.data_dir / "node.log"

    def start(self) -> None:
        self.spawn()
        self.wait_started()

    def spawn(self) -> None:
        self.proc = spawn(
            ["nsenter", f"--net=/run/netns/{self.netns}", sys.executable, "-c",
             "from bac_server.admin import serve_node; serve_node()"],
            self.env, self.log)

    def wait_started(self) -> None:
        assert self.proc is not None
        headers = {"authorization": f"Bearer {self.env['BAC_NODE_TOKEN']}"}
        wait_ready(self.proc, self.log, f"node {self.index}",
                   lambda: httpx.get(f"http://{self.address}:{RPC_PORT}/v1/node",
                                     headers=headers, timeout=2).status_code == 200)

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log, lines)

    def kill9(self) -> None:
        kill9(self.proc)

    def stop(self) -> None:
        stop(self.proc)

    def slots(self) -> list[str]:
        root = self.data_dir / "sandboxes"
        return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


@dataclass
class Cluster:
    """Nodes and replicas sharing one database, one key file and one node token."""

    database_url: str
    root: Path
    net: int = 0
    token: str = field(default_factory=lambda: secrets.token_hex(24))
    nodes: list[Node] = field(default_factory=list)
    replicas: list[ServerProcess] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)

    @property
    def bridge(self) -> str:
        return f"bacmn{self.net}"

    @property
    def key_file(self) -> Path:
        return self.root / "store.key"

    @property
    def templates_dir(self) -> Path:
        """The template root every node and replica shares (``running_cluster``)."""
        return self.root / "template-root"

    @property
    def handover_dir(self) -> Path:
        """The nodes' shared storage for paused sandboxes (one directory here)."""
        return self.root / "handover"

    def exports(self, sandbox_id: str) -> list[Path]:
        """The sandbox's complete exports on the nodes' shared storage (what another node
        takes over; ``checkpoint._handover``)."""
        home = self.handover_dir / sandbox_id
        if not home.is_dir():
            return []
        return [p for p in home.iterdir() if not p.name.startswith(".")
                and not p.name.endswith(".partial") and (p / "meta.json").exists()]

    def opts(self, replica: int = 0) -> dict[str, str]:
        """The e2b SDK's options for the first key, through ``replica``."""
        url = self.replicas[replica].url
        return {"api_key": self.keys[0], "api_url": url, "sandbox_url": url}

    def placements(self) -> dict[str, str]:
        """sandbox id -> node id, as the API replicas find them."""
        import asyncio

        from bac_server.store.key_file import load_sealer
        from bac_server.store.sql import SqlStore

        async def read() -> dict[str, str]:
            store = await SqlStore.open(self.database_url, load_sealer(self.key_file))
            try:
                return {p.object_id: p.node_id for p in await store.nodes.placements()}
            finally:
                await store.close()

        return asyncio.run(read())

    def wait_placeable(self) -> None:
        """Until every replica may send creates to every node (after a test that killed
        a node and started it again, a replica finds it back at its next look)."""
        def every() -> bool:
            return all(httpx.get(f"{r.url}/health", timeout=10).json().get("nodes")
                       == len(self.nodes) for r in self.replicas)

        until("every replica may place on every node", every)

    def shared_env(self) -> dict[str, str]:
        return {"BAC_DATABASE_URL": self.database_url, "BAC_NODE_TOKEN": self.token,
                "BAC_STORE_KEY_FILE": str(self.key_file), "BAC_NODE_HEARTBEAT_S": "1",
                "BAC_NODE_LOST_AFTER_S": "4"}

    def add_node(self, **extra_env: str) -> Node:
        [node] = self.add_nodes(1, **extra_env)
        return node

    def add_nodes(self, count: int, **extra_env: str) -> list[Node]:
        """``count`` node agents, started side by side (each start is mostly imports, on
        a CPU of its own while there is one)."""
        made = [self._new_node(**extra_env) for _ in range(count)]
        for node in made:
            node.spawn()
        for node in made:
            node.wait_started()
        return made

    def _new_node(self, **extra_env: str) -> Node:
        index = len(self.nodes) + 1
        data_dir = fresh_data_dir(f"node{index}")
        node = Node(index, data_dir, {}, net=self.net)
        _ip("link", "del", node.veth, check=False)
        _ip("netns", "del", node.netns, check=False)
        _ip("netns", "add", node.netns)
        _ip("link", "add", node.veth, "type", "veth", "peer", "name", "eth0",
            "netns", node.netns)
        _ip("link", "set", node.veth, "master", self.bridge, "up")
        _ip("-n", node.netns, "addr", "add", f"{node.address}/24", "dev", "eth0")
        _ip("-n", node.netns, "link", "set", "eth0", "up")
        _ip("-n", node.netns, "link", "set", "lo", "up")
        _ip("-n", node.netns, "route", "add", "default", "via", f"10.231.{self.net}.1")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("E2B_", "BAC_"))}
        env.update(self.shared_env(), BAC_DATA_DIR=str(data_dir),
                   BAC_TEMPLATES_DIR=str(self.templates_dir),
                   BAC_NODE_LISTEN=f"{node.address}:{RPC_PORT}",
                   BAC_NODE_TUNNEL_LISTEN=f"{node.address}:{TUNNEL_PORT}",
                   BAC_NODE_ID=f"node-{index}", BAC_POOL_SIZE="1", BAC_POOL_MAX="0",
                   BAC_NETNS_STOCK="4", BAC_SLOT_STOCK="2",
                   BAC_NODE_HANDOVER_DIR=str(self.handover_dir),
                   BAC_START_SNAPSHOT_POOL="0", BAC_METRICS_ADDRESS="")
        env.update(extra_env)
        node.env = env
        self.nodes.append(node)
        return node

    def add_replica(self, **extra_env: str) -> ServerProcess:
        [replica] = self.add_replicas(1, **extra_env)
        return replica

    def add_replicas(self, count: int, **extra_env: str) -> list[ServerProcess]:
        """``count`` API replicas, started side by side."""
        made = []
        for _ in range(count):
            # The replicas share what they keep of their own: artefacts' bytes.
            replica = ServerProcess(
                fresh_data_dir(f"api{len(self.replicas) + 1}"),
                extra_env={**self.shared_env(), "BAC_ROLE": "api",
                           "BAC_ARTEFACTS_DIR": str(self.root / "artefacts"),
                           "BAC_TEMPLATES_DIR": str(self.templates_dir), **extra_env})
            self.replicas.append(replica)
            made.append(replica)
        for replica in made:
            replica.spawn()
        for replica in made:
            replica.wait_started()
        return made

    def create_key(self, team: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BAC_")}
        env.update(self.shared_env(), BAC_DATA_DIR=str(self.root))
        done = subprocess.run([sys.executable, "-c", "from bac.cli import cli; cli()", "keys",
                               "create", team],
                              env=env, capture_output=True, text=True, check=True)
        key = done.stdout.strip().splitlines()[-1]
        self.keys.append(key)
        return key

    def kill_all_sandboxes(self) -> None:
        for replica in self.replicas:
            if replica.proc is not None and replica.proc.poll() is None:
                replica.keys = self.keys
                with contextlib.suppress(Exception):
                    replica.kill_all_sandboxes()
                return


def until(what: str, check: Callable[[], bool], bound: int = 600) -> None:
    """Poll ``check`` (50 ms apart, at most ``bound`` times): nothing across the
    processes announces what the tests wait for."""
    for _ in range(bound):
        if check():
            return
        subprocess.run(["sleep", "0.05"], check=True)
    raise AssertionError(f"never: {what}")


def wait_health(api: httpx.Client, sandbox_id: str, health: str) -> dict[str, object]:
    """The sandbox's detail once its health is ``health`` (a replica reads the nodes every
    second and marks one lost after 4 s of silence: well within this bound)."""
    for _ in range(600):
        detail: dict[str, object] = api.get(f"/sandboxes/{sandbox_id}").json()
        if detail.get("health") == health:
            return detail
        subprocess.run(["sleep", "0.05"], check=True)
    raise AssertionError(f"{sandbox_id} never became {health}: {detail}")


# The built-in templates a cluster may be given (``running_cluster``).
BUILTINS = ("base", "base-full", "code-interpreter", "desktop")


def _lay_out_templates(root: Path, builtins: tuple[str, ...]) -> None:
    """The cluster's own template root: the test machine's built-in templates and envd
    bundles hard-linked into it (no copy of their bytes: under a second for ``base``,
    about four for all of them), so that what the cluster builds and collects is its
    own, and no other server registers on it."""
    (root / "templates").mkdir(mode=0o700, parents=True)
    for part in (*(f"templates/{name}" for name in builtins), "envd"):
        subprocess.run(["cp", "-al", "--", f"{TEMPLATES_DIR}/{part}", str(root / part)],
                       check=True)


@contextlib.contextmanager
def running_cluster(database_url: str, builtins: tuple[str, ...] = ("base",)
                    ) -> Iterator[Cluster]:
    """The bridge and an empty cluster; on exit every sandbox is killed, every process
    stopped, every namespace and data dir removed, and no slot may be left on a node."""
    root = fresh_data_dir("cluster")
    net = next(n for n in range(256) if not Path(f"/sys/class/net/bacmn{n}").exists())
    cluster = Cluster(database_url, root, net)
    _lay_out_templates(cluster.templates_dir, builtins)
    _ip("link", "add", cluster.bridge, "type", "bridge")
    _ip("addr", "add", f"10.231.{net}.1/24", "dev", cluster.bridge)
    _ip("link", "set", cluster.bridge, "up")
    leaked: dict[str, list[str]] = {}
    try:
        yield cluster
    finally:
        cluster.kill_all_sandboxes()
        for replica in cluster.replicas:
            replica.stop()
        for node in cluster.nodes:
            if node.proc is not None and node.proc.poll() is not None:
                node.start()  # a node a test killed: back, to destroy what it holds
        for node in cluster.nodes:
            node.stop()
            if node.slots():
                leaked[f"node {node.index}"] = node.slots()
        for node in cluster.nodes:
            _ip("netns", "del", node.netns, check=False)
            _ip("link", "del", node.veth, check=False)
            if node.index not in [int(k.split()[1]) for k in leaked]:
                shutil.rmtree(node.data_dir, ignore_errors=True)
        for replica in cluster.replicas:
            shutil.rmtree(replica.data_dir, ignore_errors=True)
        _ip("link", "del", cluster.bridge, check=False)
        shutil.rmtree(root, ignore_errors=True)
    if leaked:
        raise AssertionError(f"sandboxes leaked on nodes: {leaked}")
