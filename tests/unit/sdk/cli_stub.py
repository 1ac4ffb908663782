"""A stub of Bac's REST API for CLI tests that need answers but no sandbox: a loopback
HTTP server with canned sandboxes and checkpoints, recording what it was asked."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from click.testing import CliRunner, Result

from bac.cli import cli


def sandbox(sandbox_id: str, state: str, end: str = "2099-01-01T00:00:00Z") -> dict[str, Any]:
    return {"templateID": "base", "sandboxID": sandbox_id, "clientID": "c",
            "startedAt": "2026-01-01T00:00:00Z", "endAt": end, "envdVersion": "0.6.13",
            "cpuCount": 2, "memoryMB": 512, "diskSizeMB": 1024, "state": state,
            "metadata": {"job": "demo"}}


@dataclass
class Stub:
    """What the stub API holds and what it was asked."""

    url: str
    sandboxes: dict[str, dict[str, Any]] = field(default_factory=dict)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return {"BAC_API_URL": self.url, "BAC_API_KEY": "k"}


def _handler(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: Any = None) -> None:
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self, method: str) -> None:
            path = self.path.split("?", 1)[0]
            stub.requests.append((method, path))
            if length := int(self.headers.get("Content-Length") or 0):
                self.rfile.read(length)
            parts = path.strip("/").split("/")
            if path == "/v2/sandboxes":
                return self._answer(200, list(stub.sandboxes.values()))
            if parts[-1] == "connect":
                found = stub.sandboxes[parts[2]]
                found["state"] = "running"
                return self._answer(201, {**found, "envdAccessToken": "t"})
            found = stub.sandboxes.get(parts[1]) if len(parts) > 1 else None
            if found is None:
                return self._answer(404, {"code": 404, "message": "sandbox not found"})
            if len(parts) == 2:
                return self._answer(200, found)
            if parts[2:] == ["checkpoints"]:
                return self._answer(200, stub.checkpoints)
            if parts[2] == "checkpoints" and parts[-1] == "restore":
                return self._answer(200, found)
            return self._answer(404, {"code": 404, "message": f"no route {path}"})

        def do_GET(self) -> None:
            self._route("GET")

        def do_POST(self) -> None:
            self._route("POST")

    return Handler


@contextlib.contextmanager
def running_stub() -> Iterator[Stub]:
    """The stub, serving on a free loopback port until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(Stub("")))
    state = Stub(f"http://127.0.0.1:{server.server_address[1]}")
    server.RequestHandlerClass = _handler(state)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def bac_cli(stub: Stub, *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=stub.env())


def checkpoint(checkpoint_id: str, name: str | None) -> dict[str, Any]:
    return {"checkpointID": checkpoint_id, "sandboxID": "sbx1", "name": name,
            "createdAt": "2026-01-01T00:00:00Z", "sizeBytes": 10, "memory": True}


