"""What a sandbox can reach, asked from inside it: one script, many targets, one run."""

from __future__ import annotations

import json

from backend_harness import Sandbox

_PROBE = """
import errno, json, socket, sys
out = {}
for target in %s:
    host, port = target.rsplit(":", 1)
    try:
        address = socket.gethostbyname(host)
    except OSError as exc:
        out[target] = "unresolved"
        continue
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((address, int(port)))
        s.sendall(b"GET / HTTP/1.0\\r\\nHost: " + host.encode() + b"\\r\\n\\r\\n")
        reply = s.recv(4096)
        out[target] = "ok" if reply.startswith(b"HTTP/1") else "no-http"
    except OSError as exc:
        out[target] = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    finally:
        s.close()
print(json.dumps(out))
"""


async def reach(sbx: Sandbox, *targets: str) -> dict[str, str]:
    """``{"host:port": "ok" | "unresolved" | <errno name>}`` for each target; a blocked
    connection fails at once with EHOSTUNREACH (the firewall rejects, never drops)."""
    result = await sbx.python(_PROBE % (list(targets),), user="user")
    assert result.exit_code == 0, result.stderr
    found: dict[str, str] = json.loads(result.stdout.strip().splitlines()[-1])
    return found
