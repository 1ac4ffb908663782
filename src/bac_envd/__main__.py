"""``python3 -m bac_envd``: bind, report readiness, then load the server.

The order is the start-up contract with the host. The listening socket is made with the
stdlib alone, ``ready\\n`` goes to ``--ready-fd`` right after ``listen()``, and only then
is the HTTP stack imported. A client that connects in between waits in the listen
backlog (it is never refused), so the host can start talking as soon as it reads the byte.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bac_envd", description="Bac in-sandbox daemon")
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on")
    parser.add_argument("--port", type=int, default=49983, help="TCP port (default 49983)")
    parser.add_argument(
        "--ready-fd",
        type=int,
        default=None,
        help="write b'ready\\n' to this fd and close it once the socket listens",
    )
    parser.add_argument(
        "--preload",
        action="store_true",
        help="import the RPC stack right after start instead of on the first RPC",
    )
    return parser.parse_args(argv)


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def _signal_ready(fd: int) -> None:
    try:
        os.write(fd, b"ready\n")
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    try:
        sock = _listen(args.host, args.port)
    except OSError as exc:
        print(f"envd: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    if args.ready_fd is not None:
        _signal_ready(args.ready_fd)

    from bac_envd._server import serve

    serve(sock, preload=args.preload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
