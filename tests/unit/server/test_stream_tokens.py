"""Stream tokens: one sandbox, one port, until they expire; the gateway's gate strips them."""

from __future__ import annotations

import pytest

from bac_server.control.streams import StreamCheck, StreamTokens, parse_ports
from bac_server.gateway.streams import StreamPass, check_stream

SECRET = "a" * 32
OTHER_SECRET = "b" * 32


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def tokens(clock: Clock) -> StreamTokens:
    return StreamTokens(ports=frozenset({6080}), ttl_s=300, max_ttl_s=3600, clock=clock)


def test_a_token_opens_its_sandbox_and_port_until_it_expires() -> None:
    clock = Clock()
    streams = tokens(clock)
    issued = streams.issue("sbx1", SECRET, 6080)
    assert issued.expires_at == int(clock.now) + 300
    assert streams.check(issued.token, "sbx1", SECRET, 6080) is StreamCheck.VALID
    clock.now += 299
    assert streams.check(issued.token, "sbx1", SECRET, 6080) is StreamCheck.VALID
    clock.now += 1
    assert streams.check(issued.token, "sbx1", SECRET, 6080) is StreamCheck.EXPIRED


def test_foreign_other_port_tampered_and_missing_tokens_are_refused() -> None:
    streams = tokens(Clock())
    token = streams.issue("sbx1", SECRET, 6080).token
    assert streams.check(token, "sbx2", OTHER_SECRET, 6080) is StreamCheck.INVALID
    assert streams.check(token, "sbx2", SECRET, 6080) is StreamCheck.INVALID  # id is signed
    assert streams.check(token, "sbx1", SECRET, 6081) is StreamCheck.INVALID
    expiry, _, mac = token.partition(".")
    assert streams.check(f"{int(expiry) + 60}.{mac}", "sbx1", SECRET, 6080) \
        is StreamCheck.INVALID
    for bad in ("", "x", ".", "123.", f".{mac}", "9" * 40 + "." + mac):
        assert streams.check(bad, "sbx1", SECRET, 6080) in (StreamCheck.INVALID,
                                                             StreamCheck.MISSING)
    assert streams.check(None, "sbx1", SECRET, 6080) is StreamCheck.MISSING
    assert streams.check(token, "sbx1", "", 6080) is StreamCheck.INVALID


def test_lifetimes_are_bounded_at_issue_and_at_check() -> None:
    clock = Clock()
    streams = tokens(clock)
    with pytest.raises(ValueError, match=r"1\.\.3600"):
        streams.issue("sbx1", SECRET, 6080, ttl_s=3601)
    with pytest.raises(ValueError, match="access token"):
        streams.issue("sbx1", "", 6080)
    # One made with the key but ending too far out (whoever holds the envd token) is refused.
    long_lived = StreamTokens(ttl_s=10, max_ttl_s=10**6, clock=clock).issue(
        "sbx1", SECRET, 6080, ttl_s=10**5)
    assert streams.check(long_lived.token, "sbx1", SECRET, 6080) is StreamCheck.INVALID


def test_ports_setting() -> None:
    assert parse_ports("6080, 6081,") == frozenset({6080, 6081})
    assert parse_ports("") == frozenset()
    for bad in ("x", "0", "70000"):
        with pytest.raises(ValueError):
            parse_ports(bad)


def _scope(query: bytes, cookies: bytes | None, kind: str = "http") -> dict[str, object]:
    headers = [(b"host", b"6080-sbx1.localhost")]
    if cookies is not None:
        headers.append((b"cookie", cookies))
    return {"type": kind, "scheme": "https" if kind == "http" else "wss", "path": "/vnc.html",
            "query_string": query, "headers": headers}


def test_the_gate_takes_the_token_out_and_sets_a_strict_cookie_from_the_url() -> None:
    streams = tokens(Clock())
    token = streams.issue("sbx1", SECRET, 6080).token
    scope = _scope(b"autoconnect=true&bac_stream=" + token.encode() + b"&resize=scale",
                   b"theme=dark")
    checked = check_stream(streams, scope, "sbx1", SECRET, 6080)
    assert isinstance(checked, StreamPass)
    assert checked.scope["query_string"] == b"autoconnect=true&resize=scale"
    assert (b"cookie", b"theme=dark") in checked.scope["headers"]
    assert checked.set_cookie == (f"bac_stream={token}; Path=/; Max-Age=300; HttpOnly; "
                                  "SameSite=Strict; Secure").encode()


def test_the_gate_accepts_the_cookie_and_strips_it_from_the_relayed_request() -> None:
    streams = tokens(Clock())
    token = streams.issue("sbx1", SECRET, 6080).token
    scope = _scope(b"", f"a=1; bac_stream={token}; b=2".encode(), kind="websocket")
    checked = check_stream(streams, scope, "sbx1", SECRET, 6080)
    assert isinstance(checked, StreamPass) and checked.set_cookie is None
    assert [v for n, v in checked.scope["headers"] if n == b"cookie"] == [b"a=1; b=2"]
    only = check_stream(streams, _scope(b"", f"bac_stream={token}".encode()), "sbx1", SECRET,
                        6080)
    assert isinstance(only, StreamPass)
    assert all(n != b"cookie" for n, _ in only.scope["headers"])


def test_the_gate_refuses_what_the_tokens_refuse() -> None:
    streams = tokens(Clock())
    other = streams.issue("sbx2", OTHER_SECRET, 6080).token
    assert check_stream(streams, _scope(b"", None), "sbx1", SECRET, 6080) \
        is StreamCheck.MISSING
    assert check_stream(streams, _scope(b"bac_stream=" + other.encode(), None), "sbx1",
                        SECRET, 6080) is StreamCheck.INVALID


def test_the_gate_takes_a_token_from_the_path_prefix_for_framed_viewers() -> None:
    """``/bac_stream/<token>/rest``: the relayed path is ``/rest``, no cookie is set (the
    page's relative URLs keep the prefix), and a foreign token there is refused."""
    streams = tokens(Clock())
    token = streams.issue("sbx1", SECRET, 6080).token
    scope = dict(_scope(b"scale=true", None), path=f"/bac_stream/{token}/app/ui.js")
    checked = check_stream(streams, scope, "sbx1", SECRET, 6080)
    assert isinstance(checked, StreamPass) and checked.set_cookie is None
    assert checked.scope["path"] == "/app/ui.js"
    assert checked.scope["raw_path"] == b"/app/ui.js"
    assert checked.scope["query_string"] == b"scale=true"
    ws = dict(_scope(b"", None, kind="websocket"), path=f"/bac_stream/{token}/websockify")
    passed = check_stream(streams, ws, "sbx1", SECRET, 6080)
    assert isinstance(passed, StreamPass) and passed.scope["path"] == "/websockify"
    other = streams.issue("sbx2", OTHER_SECRET, 6080).token
    foreign = dict(_scope(b"", None), path=f"/bac_stream/{other}/vnc_lite.html")
    assert check_stream(streams, foreign, "sbx1", SECRET, 6080) is StreamCheck.INVALID
    # The path's token wins over a valid cookie: a wrong one there is not rescued.
    mixed = dict(_scope(b"", f"bac_stream={token}".encode()),
                 path=f"/bac_stream/{other}/vnc_lite.html")
    assert check_stream(streams, mixed, "sbx1", SECRET, 6080) is StreamCheck.INVALID
