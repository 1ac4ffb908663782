"""The node agent's composition root (``bac node``): this machine's namespace backend,
served to the API replicas (``bac_server.nodes.NodeAgent``, docs/scale-out.md).

Like ``app`` for the all-in-one server, the one place that names the concrete backend and
store for a node. The node needs the shared PostgreSQL database (its row, its beats, the
secrets its egress relay puts into requests), the store's key file (the same as the
replicas'), and the template root the replicas name templates in.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import uvicorn
from starlette.applications import Starlette

from bac_server.api.volumes import served_routes
from bac_server.app import build_backend, build_templates, open_store, warm_up
from bac_server.config import ConfigError, ServerConfig
from bac_server.host import prepare_host
from bac_server.nodes import NodeAgent, NodeIdentity
from bac_server.store.key_file import load_sealer

log = logging.getLogger(__name__)


def split_address(value: str, setting: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(f"{setting}={value!r} is not host:port")
    return host.strip("[]") or "0.0.0.0", int(port)


def node_id_of(config: ServerConfig) -> str:
    """``BAC_NODE_ID``, else the id kept in the data dir (made at the first start): a
    restarted node is the same node, with the same sandboxes."""
    if config.node_id:
        return config.node_id
    kept = config.data_dir / "node-id"
    try:
        return kept.read_text().strip()
    except FileNotFoundError:
        pass
    made = "node-" + secrets.token_hex(6)
    kept.parent.mkdir(parents=True, exist_ok=True)
    partial = kept.with_suffix(".partial")
    partial.write_text(made + "\n")
    os.replace(partial, kept)
    return made


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise ConfigError("cannot read this machine's memory: set BAC_NODE_MEMORY_MB")


def _advertised(config: ServerConfig, listen_host: str) -> str:
    if config.node_advertise:
        return config.node_advertise
    if listen_host not in ("0.0.0.0", "::"):
        return listen_host
    return socket.gethostbyname(socket.gethostname())


def _version() -> str:
    try:
        return version("bac")
    except PackageNotFoundError:
        return "0.0.0"


async def run_node(config: ServerConfig) -> None:
    """Serve until cancelled; sandboxes keep running after it (a restarted agent takes them
    back)."""
    config.check_multinode("bac node")
    rpc_host, rpc_port = split_address(config.node_listen, "BAC_NODE_LISTEN")
    tunnel_host, tunnel_port = split_address(config.node_tunnel_listen,
                                             "BAC_NODE_TUNNEL_LISTEN")
    if config.prepare_host:
        await asyncio.to_thread(prepare_host)
    store = await open_store(config)
    backend = build_backend(config, store.secrets.secret_values,
                            await asyncio.to_thread(load_sealer, config.store_key_path),
                            node=True)
    identity = NodeIdentity(
        node_id=node_id_of(config), address=_advertised(config, rpc_host),
        rpc_port=rpc_port, tunnel_port=tunnel_port,
        vcpus=config.node_vcpus or os.cpu_count() or 1,
        memory_mb=config.node_memory_mb or _memory_mb(), version=_version())
    agent = NodeAgent(backend=backend, identity=identity, token=config.node_token,
                      node_store=store.nodes, heartbeat_s=config.node_heartbeat_s)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # In uvicorn's lifespan, so that a SIGTERM's graceful stop runs it to its end.
        warming: asyncio.Task[None] | None = None
        try:
            await agent.start(tunnel_host)
            warming = asyncio.create_task(warm_up(backend, build_templates(config), config))
            log.info("node %s serving at %s:%d (tunnel %s:%d)", identity.node_id,
                     identity.address, rpc_port, tunnel_host, tunnel_port)
            yield
        finally:
            if warming is not None:
                warming.cancel()
                await asyncio.gather(warming, return_exceptions=True)
            await agent.close()
            await backend.close()
            await store.close()

    # The volume content API of the volumes kept here, for the replicas to relay.
    served = served_routes("/v1/volumecontent", backend.volume_dir)
    server = uvicorn.Server(uvicorn.Config(
        agent.app(lifespan, served), host=rpc_host, port=rpc_port, lifespan="on",
        log_level="warning", timeout_keep_alive=75, server_header=False))
    await server.serve()
