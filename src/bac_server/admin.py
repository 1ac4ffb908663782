"""Administration entry points the ``bac`` CLI calls: ``serve``, API key management and
template storage collection.

Key functions open the store directly (the server need not run) and raise ``ValueError`` for
bad input, which the CLI prints as a one-line error. ``collect_garbage`` does what the
server's background collection does, also while the server runs (builds and collections
exclude each other across processes).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from bac_server.config import ServerConfig
from bac_server.control import ControlError, KeyInfo, KeyService
from bac_server.host import HostSetupError, IdRange, prepare_host, secure_data_dir
from bac_server.store import Store, StoreError

T = TypeVar("T")


def uvicorn_options(config: ServerConfig) -> dict[str, Any]:
    """How ``bac serve`` runs uvicorn (also used by tests that start a server)."""
    tls = {} if config.tls_cert is None else {
        "ssl_certfile": str(config.tls_cert), "ssl_keyfile": str(config.tls_key)}
    return tls | {
        "host": config.host,
        "port": config.port,
        "loop": "uvloop",
        "http": "httptools",
        "ws": "websockets-sansio",
        "lifespan": "on",
        # The gateway passes the sandbox's own Server/Date headers through.
        "server_header": False,
        "date_header": False,
        # The SDKs keep idle connections up to 300 s (E2B_KEEPALIVE_EXPIRY); closing them
        # sooner makes a client race our close on its next request, so the client closes first.
        "timeout_keep_alive": 330,
    }


def serve(
    *,
    host: str | None = None,
    port: int | None = None,
    data_dir: Path | str | None = None,
    domain: str | None = None,
    **overrides: Any,
) -> None:
    """Run the server in the foreground until interrupted."""
    import uvicorn

    from bac_server.app import create_app

    config = ServerConfig.from_env().with_overrides(
        host=host, port=port, data_dir=data_dir, domain=domain, **overrides
    )
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if config.tls_cert is not None:
        try:  # the pair uvicorn will load, checked here for a one-line error
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                config.tls_cert, config.tls_key)
        except (OSError, ssl.SSLError) as exc:
            raise SystemExit(f"bac serve: cannot use BAC_TLS_CERT={config.tls_cert} and "
                             f"BAC_TLS_KEY={config.tls_key}: {exc}") from None
    # Before listening, so a host that cannot run sandboxes safely (an API replica runs
    # none: it prepares nothing) (a device node not
    # root's, a missing binary, a data dir it cannot make private) stops the server with
    # one line of advice.
    try:
        if config.prepare_host and config.role != "api":
            prepare_host()
        secure_data_dir(config.data_dir, IdRange())
    except HostSetupError as exc:
        raise SystemExit(f"bac serve: refusing to start: {exc}") from None
    # The store opened (and migrated) once before listening: a database URL of the wrong
    # kind, a database that cannot be reached or is newer than this server, a key file it
    # cannot use, each stops the server in one line instead of a failed lifespan's trace.
    try:
        asyncio.run(_store_opens(config))
    except (HostSetupError, StoreError) as exc:
        raise SystemExit(f"bac serve: refusing to start: {exc}") from None
    if config.role == "api":
        try:
            config.check_multinode("bac serve --role api")
        except ValueError as exc:
            raise SystemExit(f"bac serve: refusing to start: {exc}") from None
        # A line per call to a node would drown the log.
        logging.getLogger("httpx").setLevel(logging.WARNING)
    if config.prepare_host:
        config = dataclasses.replace(config, prepare_host=False)
    uvicorn.run(create_app(config), **uvicorn_options(config))


def serve_node(*, data_dir: Path | str | None = None, **overrides: Any) -> None:
    """Run a node agent (``bac node``) in the foreground until interrupted."""
    import uvloop

    from bac_server.config import ConfigError
    from bac_server.node_app import run_node

    config = ServerConfig.from_env().with_overrides(data_dir=data_dir, **overrides)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config.check_multinode("bac node")
        if config.prepare_host:
            prepare_host()
        secure_data_dir(config.data_dir, IdRange())
        uvloop.run(run_node(dataclasses.replace(config, prepare_host=False)))
    except (HostSetupError, StoreError, ConfigError) as exc:
        raise SystemExit(f"bac node: refusing to start: {exc}") from None
    except KeyboardInterrupt:
        pass


async def _store_opens(config: ServerConfig) -> None:
    from bac_server.app import open_store

    store = await open_store(config)
    await store.close()


async def _open_store(config: ServerConfig) -> Store:
    """The store as the server opens it (data dir checked, secrets sealed); a data dir or
    key file it cannot use is a one-line ``ValueError``."""
    from bac_server.app import open_store

    try:
        return await open_store(config)
    except (HostSetupError, StoreError) as exc:
        raise ValueError(str(exc)) from exc


def _with_keys(data_dir: Path | str | None, use: Callable[[KeyService], Awaitable[T]]) -> T:
    config = ServerConfig.from_env().with_overrides(data_dir=data_dir)

    async def run() -> T:
        store = await _open_store(config)
        try:
            return await use(KeyService(store.keys))
        except ControlError as exc:
            raise ValueError(str(exc)) from exc
        finally:
            await store.close()

    return asyncio.run(run())


def create_key(team: str, name: str = "default", *, data_dir: Path | str | None = None) -> str:
    """Issue an API key for ``team`` (created when new); the key is returned only here."""
    return _with_keys(data_dir, lambda keys: keys.create(team, name))


def list_keys(*, data_dir: Path | str | None = None) -> list[KeyInfo]:
    return _with_keys(data_dir, lambda keys: keys.list())


def revoke_key(key_id_or_prefix: str, *, data_dir: Path | str | None = None) -> int:
    """Revoke by key id or prefix; returns how many keys were revoked."""
    return _with_keys(data_dir, lambda keys: keys.revoke(key_id_or_prefix))


def collect_garbage(*, data_dir: Path | str | None = None, dry_run: bool = False,
                    grace_s: float | None = None) -> dict[str, Any]:
    """One collection pass over the data dir's template storage and uploads (a dry run
    deletes nothing); the report as JSON-ready data."""
    from bac_server.app import build_backend, build_gc, build_templates
    from bac_server.nodes import NodeFleet

    config = ServerConfig.from_env().with_overrides(data_dir=data_dir, gc_grace_s=grace_s)
    if not config.data_dir.is_dir():
        raise ValueError(f"no data directory at {config.data_dir}")

    async def run() -> dict[str, Any]:
        store = await _open_store(config)
        fleet: NodeFleet | None = None
        try:
            if config.role == "api":
                # Several machines (docs/scale-out.md): the shared template root, with
                # what every node mounts.
                config.check_multinode("bac admin gc with BAC_ROLE=api")
                fleet = NodeFleet(node_store=store.nodes, token=config.node_token,
                                  heartbeat_s=config.node_heartbeat_s,
                                  lost_after_s=config.node_lost_after_s)
                await fleet.refresh()
                gc = await build_gc(config, store, fleet, build_templates(config), fleet=True)
            else:
                gc = await build_gc(config, store, build_backend(config),
                                    build_templates(config))
            return (await gc.run(dry_run=dry_run)).to_json()
        finally:
            if fleet is not None:
                await fleet.close()
            await store.close()

    return asyncio.run(run())
