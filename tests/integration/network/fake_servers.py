"""The servers of the fake internet, each run inside its own network namespace.

``python3 fake_servers.py web``: HTTP/1.1 on ports 80 and 8080 of every address (and
HTTPS on 443 with ``$FAKE_TLS_DIR``'s ``site.pem`` and ``site.key``),
answering with the address it was reached at and the Host header and keeping the
requests it saw (``GET /_seen``), plus a byte sink on port 9000 (for throughput) and a
one-line answer on port 53, TCP on every address and UDP on the addresses named after
``web`` (the fake internet's sites when none is named).
``python3 fake_servers.py dns``: an authoritative server for the ``.test`` names in
ZONE. Each prints ``ready`` once it listens.
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import dns.message
import dns.rcode
import dns.rrset
from fake_internet import SITE_A, SITE_B, SITE_C

ZONE = {
    "allowed.test": "198.51.100.10",
    "other.test": "198.51.100.20",
    "a.wild.test": "198.51.100.10",
    "b.wild.test": "198.51.100.20",
    "wild.test": "198.51.100.20",
    "rebind.test": "10.203.255.2",  # an allowed name answering with a private address
    "metadata.test": "169.254.169.254",
}
_SEEN: list[dict[str, object]] = []
_SEEN_LOCK = threading.Lock()


class _Echo(BaseHTTPRequestHandler):
    """Answers with the address it was reached at, the Host, the path and the client's
    port (one per connection, so keep-alive shows), keeping connections alive; every
    request it parsed is kept, read back at ``/_seen``."""

    protocol_version = "HTTP/1.1"

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        if parsed and self.path != "/_seen":
            with _SEEN_LOCK:
                _SEEN.append({"method": self.command, "path": self.path,
                              "hosts": self.headers.get_all("Host") or [],
                              "headers": [[k, v] for k, v in self.headers.items()]})
        return parsed

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.path == "/_seen":
            with _SEEN_LOCK:
                body = json.dumps(_SEEN).encode()
        else:
            body = json.dumps({"local": self.connection.getsockname()[0],
                               "host": self.headers.get("Host"), "path": self.path,
                               "peer": self.client_address[1]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *_args: object) -> None:
        pass


class _Sink(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        total = 0
        while chunk := self.request.recv(1 << 16):
            total += len(chunk)
        self.request.sendall(str(total).encode())


class _Port53Tcp(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(b"tcp 53\n")


class _Port53Udp(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        _data, sock = self.request
        sock.sendto(b"udp 53\n", self.client_address)


def web(udp_sites: list[str]) -> None:
    servers: list[socketserver.BaseServer] = [
        ThreadingHTTPServer(("0.0.0.0", port), _Echo) for port in (80, 8080)]
    tls_dir = os.environ.get("FAKE_TLS_DIR")
    if tls_dir:
        https = ThreadingHTTPServer(("0.0.0.0", 443), _Echo)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(os.path.join(tls_dir, "site.pem"),
                                os.path.join(tls_dir, "site.key"))
        https.socket = context.wrap_socket(https.socket, server_side=True)
        servers.append(https)
    socketserver.ThreadingTCPServer.allow_reuse_address = True
    servers.append(socketserver.ThreadingTCPServer(("0.0.0.0", 9000), _Sink))
    # Port 53 of every web address answers too (a resolver a sandbox names in
    # dnsServers, next to a web server on the same address).
    servers.append(socketserver.ThreadingTCPServer(("0.0.0.0", 53), _Port53Tcp))
    # UDP answers must come from the address asked (NAT matches them to the query).
    servers += [socketserver.ThreadingUDPServer((site, 53), _Port53Udp)
                for site in udp_sites]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print("ready", flush=True)
    threading.Event().wait()


def dns_server() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((sys.argv[2], 53))  # answers must come from the address asked
    print("ready", flush=True)
    while True:
        wire, client = sock.recvfrom(4096)
        query = dns.message.from_wire(wire)
        response = dns.message.make_response(query)
        question = query.question[0]
        name = question.name.to_text(omit_final_dot=True).lower()
        if name in ZONE and question.rdtype == 1:
            response.answer.append(dns.rrset.from_text(question.name, 300, "IN", "A",
                                                       ZONE[name]))
        elif name not in ZONE:
            response.set_rcode(dns.rcode.NXDOMAIN)
        sock.sendto(response.to_wire(), client)


if __name__ == "__main__":
    if sys.argv[1] == "web":
        web(sys.argv[2:] or [SITE_A, SITE_B, SITE_C])
    else:
        dns_server()
