"""The host-name-checking relay against requests that name another site after, beside or
inside an allowed one, from a real sandbox to the fake internet, whose web server says
which requests it saw (one server for every name on an address, as a CDN would be)."""

from __future__ import annotations

import asyncio
import json
import secrets
from dataclasses import dataclass

import pytest
from backend_harness import Sandbox, SandboxFactory
from fake_internet import requests_seen

from bac_server.backends.egress import WirePolicy, parse_policy

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

# Each exchange: bytes sent at once (a list: sent one after another, waiting ``pause``
# seconds between), then everything read back until the relay closes or 5 s pass.
_EXCHANGE = """
import json, socket, time
address = socket.gethostbyname("allowed.test")
out = {}
for name, parts, pause in %s:
    s = socket.create_connection((address, 80), 5)
    s.settimeout(5)
    data, closed = b"", False
    try:
        for index, part in enumerate(parts):
            if index:
                time.sleep(pause)
            s.sendall(part.encode())
        while chunk := s.recv(65536):
            data += chunk
        closed = True
    except socket.timeout:
        pass
    except OSError:  # reset, or a write after the relay closed
        closed = True
    s.close()
    bodies = [d.split(b"\\r\\n\\r\\n", 1)[1] for d in data.split(b"HTTP/1.1 ")[1:]]
    out[name] = {"answers": [json.loads(b) for b in bodies], "closed": closed}
print(json.dumps(out))
"""


@dataclass(frozen=True)
class _Exchange:
    answers: list[dict[str, object]]  # the fake site's echo of each request answered
    closed: bool  # the relay (or the site) closed the connection

    @property
    def paths(self) -> list[object]:
        return [a["path"] for a in self.answers]


async def _exchanges(sbx: Sandbox, cases: list[tuple[str, list[str], float]]
                     ) -> dict[str, _Exchange]:
    result = await sbx.python(_EXCHANGE % (cases,), user="user")
    assert result.exit_code == 0, result.stderr
    found = json.loads(result.stdout.strip().splitlines()[-1])
    return {name: _Exchange(**value) for name, value in found.items()}


async def _paths_seen() -> set[str]:
    return {str(r["path"]) for r in await asyncio.to_thread(requests_seen)}


@pytest.fixture
async def sbx(make_sandbox: SandboxFactory) -> Sandbox:
    return await make_sandbox(network=parse_policy(WirePolicy(["allowed.test"], ["0.0.0.0/0"])))


def _get(path: str, host: str, extra: str = "") -> str:
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n"


async def test_every_request_of_a_connection_is_checked(sbx: Sandbox) -> None:
    """A request pipelined after an allowed one, naming another host on the same address,
    is refused and never reaches the site; the allowed one before it is answered."""
    t = secrets.token_hex(4)
    found = await _exchanges(sbx, [
        ("pipelined", [_get(f"/{t}-first", "allowed.test")
                       + _get(f"/{t}-second", "evil.test")], 0)])
    assert found["pipelined"].paths == [f"/{t}-first"], found
    assert found["pipelined"].closed
    seen = await _paths_seen()
    assert f"/{t}-first" in seen
    assert f"/{t}-second" not in seen


async def test_keep_alive_and_pipelining_keep_working(sbx: Sandbox) -> None:
    """Allowed requests on one connection, pipelined or one after another, are each
    answered, in order, over one connection to the site."""
    t = secrets.token_hex(4)
    found = await _exchanges(sbx, [
        ("pipelined", [_get(f"/{t}-a", "allowed.test") + _get(f"/{t}-b", "allowed.test")
                       + _get(f"/{t}-c", "allowed.test", "Connection: close\r\n")], 0),
        ("sequential", [_get(f"/{t}-d", "allowed.test"),
                        _get(f"/{t}-e", "allowed.test", "Connection: close\r\n")], 0.3)])
    for name, paths in (("pipelined", ["a", "b", "c"]), ("sequential", ["d", "e"])):
        assert found[name].paths == [f"/{t}-{p}" for p in paths], found
        # One connection to the site (its client port) for all of them.
        assert len({a["peer"] for a in found[name].answers}) == 1, found[name]


async def test_requests_that_can_be_read_two_ways_are_refused(sbx: Sandbox) -> None:
    """Two Host headers, an absolute URL naming another host, Content-Length with
    Transfer-Encoding (a smuggled request behind it), a folded header line and an opening
    cut short before the Host that follows are each refused: no answer, and the site
    never sees the request. An absolute URL naming the allowed host passes."""
    t = secrets.token_hex(4)
    smuggled = _get(f"/{t}-smuggled", "evil.test")
    cases = [
        ("two-hosts", [f"GET /{t}-two-hosts HTTP/1.1\r\nHost: allowed.test\r\n"
                       "Host: evil.test\r\n\r\n"], 0),
        ("absolute", [_get(f"http://evil.test/{t}-absolute", "allowed.test")], 0),
        ("cl-te", [f"POST /{t}-cl-te HTTP/1.1\r\nHost: allowed.test\r\n"
                   f"Content-Length: {5 + len(smuggled)}\r\nTransfer-Encoding: chunked\r\n"
                   f"\r\n0\r\n\r\n{smuggled}"], 0),
        ("folded", [f"GET /{t}-folded HTTP/1.1\r\nHost: allowed.test\r\nX-Fold: a\r\n"
                    " Host: evil.test\r\n\r\n"], 0),
        ("cut-short", [f"GET /{t}-cut-short HTTP/1.1", "\r\nHost: evil.test\r\n\r\n"], 3.5),
        ("absolute-same", [_get(f"http://allowed.test/{t}-absolute-same", "allowed.test",
                                "Connection: close\r\n")], 0),
    ]
    found = await _exchanges(sbx, cases)
    refused = [name for name, _parts, _pause in cases[:-1]]
    assert {name: found[name].paths for name in refused} == {n: [] for n in refused}
    assert all(found[name].closed for name in refused), found
    assert found["absolute-same"].paths == [f"http://allowed.test/{t}-absolute-same"]
    leaked = {p for p in await _paths_seen() if t in p} - {f"http://allowed.test/{t}-absolute-same"}
    assert leaked == set()
