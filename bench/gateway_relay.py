"""Gateway relay overhead: Bac's pooled relay vs an httpx-based relay, against direct access.

Three processes serve on loopback: an upstream HTTP server (standing in for a sandbox
port), Bac's gateway in front of it, and a minimal httpx relay in front of it. A blocking
keep-alive socket client sends N sequential requests to each and prints p50/p99 and the
overhead over direct access. This is the measurement behind the choice of relay.

    .venv/bin/python bench/gateway_relay.py [-n 3000]
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(app: object, port: int) -> None:
    import uvicorn

    from bac_server.admin import uvicorn_options
    from bac_server.config import ServerConfig

    options = uvicorn_options(ServerConfig(host="127.0.0.1", port=port))
    options.update(lifespan="off", log_level="warning")
    uvicorn.run(app, **options)  # type: ignore[arg-type]


def upstream(port: int) -> None:
    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            return
        await receive()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"5")]})
        await send({"type": "http.response.body", "body": b"hello"})

    _run(app, port)


def bac_gateway(port: int, upstream_port: int, metered: bool = False) -> None:
    from starlette.applications import Starlette

    from bac_server.control import LiveSandbox, Registry, Route, SandboxState
    from bac_server.control.telemetry import Telemetry
    from bac_server.gateway import Dispatcher, Gateway, GatewaySlot

    registry = Registry()
    now = datetime.now(UTC)
    registry.add(LiveSandbox(
        sandbox_id="bench", team_id="t", template_id="base", alias=None, cpu_count=1,
        memory_mb=512, disk_mb=1, envd_access_token="x", traffic_access_token=None, metadata={},
        env_vars={}, network=None, allow_internet_access=None, started_at=now,
        end_at=now + timedelta(days=1), state=SandboxState.RUNNING,
        route=Route("bench", "127.0.0.1", upstream_port, None, "x"),
    ))
    gateway = Gateway(registry, telemetry=Telemetry() if metered else None)
    _run(Dispatcher(Starlette(), "localhost", GatewaySlot(gateway)), port)


def httpx_gateway(port: int, upstream_port: int) -> None:
    import httpx

    client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{upstream_port}")

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            return
        await receive()
        request = client.build_request(scope["method"], scope["path"])
        response = await client.send(request, stream=True)
        await send({"type": "http.response.start", "status": response.status_code,
                    "headers": response.headers.raw})
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        await response.aclose()

    _run(app, port)


def _wait(port: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def measure(port: int, sandbox_port: int, n: int) -> list[float]:
    request = (b"GET /hello HTTP/1.1\r\nhost: localhost\r\ne2b-sandbox-id: bench\r\n"
               b"e2b-sandbox-port: %d\r\n\r\n" % sandbox_port)
    times = []
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(n + 50):
            start = time.perf_counter()
            sock.sendall(request)
            data = b""
            while not data.endswith(b"hello"):
                chunk = sock.recv(65536)
                if not chunk:
                    raise RuntimeError("connection closed")
                data += chunk
            if i >= 50:  # warm-up
                times.append((time.perf_counter() - start) * 1000)
    return times


def _pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=3000)
    args = parser.parse_args()
    up, bac, metered, hx = _free_port(), _free_port(), _free_port(), _free_port()
    procs = [
        multiprocessing.Process(target=upstream, args=(up,), daemon=True),
        multiprocessing.Process(target=bac_gateway, args=(bac, up), daemon=True),
        # What the server runs: the relay counting for the Prometheus metrics.
        multiprocessing.Process(target=bac_gateway, args=(metered, up, True), daemon=True),
        multiprocessing.Process(target=httpx_gateway, args=(hx, up), daemon=True),
    ]
    for proc in procs:
        proc.start()
    try:
        for port in (up, bac, metered, hx):
            _wait(port)
        results = {name: measure(port, up, args.n)
                   for name, port in (("direct", up), ("bac relay", bac), ("bac metered", metered),
                                      ("httpx relay", hx))}
    finally:
        for proc in procs:
            proc.terminate()
            proc.join()
    base = statistics.median(results["direct"])
    print(f"{'path':<12} {'p50 ms':>8} {'p99 ms':>8} {'overhead p50':>13}")
    for name, times in results.items():
        p50 = statistics.median(times)
        print(f"{name:<12} {p50:8.3f} {_pct(times, 99):8.3f} {p50 - base:+12.3f}ms")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
