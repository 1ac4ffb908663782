"""A real HTTP receiver on loopback for webhook tests: records every request and answers
the status codes it is told to, in order, per path (200 once they run out)."""

from __future__ import annotations

import base64
import hashlib
import json
import queue
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Arrival:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int  # what the receiver answered

    def json(self) -> Any:
        return json.loads(self.body)


def e2b_signature(secret: str, body: bytes) -> str:
    """E2B's documented signature, computed here independently of the server's code."""
    return base64.b64encode(hashlib.sha256(secret.encode() + body).digest()).decode().rstrip("=")


@dataclass
class Receiver:
    server: ThreadingHTTPServer
    arrivals: queue.Queue[Arrival] = field(default_factory=queue.Queue)
    answers: dict[str, list[int]] = field(default_factory=dict)
    held: dict[str, threading.Event] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, path: str, host: str = "127.0.0.1", scheme: str = "http") -> str:
        return f"{scheme}://{host}:{self.port}{path}"

    def answer(self, path: str, *codes: int) -> None:
        with self.lock:
            self.answers[path] = list(codes)

    def hold(self, path: str) -> threading.Event:
        """Requests to ``path`` get no answer until the returned event is set."""
        with self.lock:
            gate = self.held[path] = threading.Event()
        return gate

    def next(self, timeout: float = 30.0) -> Arrival:
        """The next request to arrive (waits on it, bounded)."""
        return self.arrivals.get(timeout=timeout)

    def until(self, match: Any, timeout: float = 30.0) -> list[Arrival]:
        """Every arrival up to and including the first one ``match`` accepts."""
        seen = []
        while True:
            arrival = self.next(timeout)
            seen.append(arrival)
            if match(arrival):
                return seen


@contextmanager
def receiving(tls: tuple[Path, Path] | None = None) -> Iterator[Receiver]:
    """A receiver on 127.0.0.1; with ``tls`` (certificate, key) it speaks https."""
    holder: list[Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            receiver = holder[0]
            with receiver.lock:
                codes = receiver.answers.get(self.path) or []
                status = codes.pop(0) if codes else 200
            # Recorded before the answer: once the sender has its status, the test has it.
            receiver.arrivals.put(Arrival(self.path, {k.lower(): v for k, v in
                                                      self.headers.items()}, body, status))
            with receiver.lock:
                gate = receiver.held.get(self.path)
            if gate is not None:
                gate.wait(30)
            self.send_response(status)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    receiver = Receiver(server)
    holder.append(receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
