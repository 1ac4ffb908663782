"""A WebSocket echo server on the standard library only, run inside a sandbox (the base
template has no WebSocket package). Text frames up to 64 KiB, masked as clients send."""

import base64
import hashlib
import socket
import struct
import sys
import threading

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _serve(conn: socket.socket) -> None:
    head = b""
    while b"\r\n\r\n" not in head:
        head += conn.recv(4096)
    key = next(line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")
               if line.lower().startswith(b"sec-websocket-key"))
    accept = base64.b64encode(hashlib.sha1(key + _GUID).digest())
    conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                 b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
    while True:
        first = conn.recv(2)
        if len(first) < 2 or first[0] & 0x0F == 8:
            return
        size = first[1] & 0x7F
        if size == 126:
            size = struct.unpack("!H", conn.recv(2))[0]
        mask = conn.recv(4)
        data = b""
        while len(data) < size:
            data += conn.recv(size - len(data))
        text = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        reply = b"echo:" + text
        header = bytes([0x81, len(reply)]) if len(reply) < 126 else \
            bytes([0x81, 126]) + struct.pack("!H", len(reply))
        conn.sendall(header + reply)


def main() -> None:
    server = socket.create_server(("0.0.0.0", int(sys.argv[1])))
    while True:
        conn, _ = server.accept()
        threading.Thread(target=_serve, args=(conn,), daemon=True).start()


main()
