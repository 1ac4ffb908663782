"""`python3 -m bac_kernel --port 49999 [--ready-fd N]`: the kernel server of a sandbox.

The listening socket is bound before anything else, so a client that connects early
waits in the backlog instead of being refused; `ready` goes to `--ready-fd` once the
socket listens and the routes are live (the default Python kernel keeps starting in the
background, and the first execution waits for it).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket

import uvicorn

from bac_kernel._app import create_app
from bac_kernel._contexts import DEFAULT_CWD, ContextRegistry
from bac_kernel._envd import DEFAULT_ENVD_URL, EnvdClient
from bac_kernel._kernel import ACK_TIMEOUT


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python3 -m bac_kernel", description=__doc__)
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on")
    parser.add_argument("--port", type=int, default=49999)
    parser.add_argument("--ready-fd", type=int, help="write b'ready\\n' here once listening")
    parser.add_argument("--envd-url", default=DEFAULT_ENVD_URL, help="'' to never ask envd")
    parser.add_argument("--cwd", default=DEFAULT_CWD, help="cwd of contexts that name none")
    parser.add_argument(
        "--prestart", default="python", help="comma-separated languages started at once"
    )
    parser.add_argument(
        "--ack-timeout", type=float, default=ACK_TIMEOUT,
        help="seconds a kernel may take to start on a request before it is restarted as wedged",
    )
    parser.add_argument("--log-level", default="warning")
    return parser.parse_args(argv)


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must say TCP: asyncio sets TCP_NODELAY only on sockets whose proto is
    # IPPROTO_TCP (accepted ones inherit it), and without it every NDJSON line after the
    # first waits out the client's delayed ACK (~40 ms) on a kept-alive connection.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    logging.basicConfig(level=args.log_level.upper(), format="bac_kernel %(levelname)s %(message)s")
    sock = _listen(args.host, args.port)
    ready_fd: int | None = args.ready_fd

    def on_ready() -> None:
        nonlocal ready_fd
        if ready_fd is not None:
            os.write(ready_fd, b"ready\n")
            os.close(ready_fd)
            ready_fd = None

    if args.ack_timeout <= 0:
        raise SystemExit("--ack-timeout must be positive")
    registry = ContextRegistry(
        EnvdClient(args.envd_url or None), args.cwd, ack_timeout=args.ack_timeout
    )
    prestart = [name for name in args.prestart.split(",") if name.strip()]
    app = create_app(registry, prestart=prestart, on_ready=on_ready)
    config = uvicorn.Config(
        app, http="h11", ws="none", lifespan="on", log_level=args.log_level, access_log=False,
        # On SIGTERM, kept-alive or streaming connections must not hold the process after
        # its listener closed: its supervisor restarts it only once it has exited.
        timeout_graceful_shutdown=3,
    )
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
