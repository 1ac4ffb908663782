"""What a relayed connection opens with: TLS and its SNI from a real ClientHello (made by
the ssl module), HTTP/1 however a lenient server would read its request line, other
protocols, and openings cut short."""

from __future__ import annotations

import ssl

import pytest

from bac_server.backends.namespaces.network._opening import (
    Kind,
    NeedMore,
    Opening,
    classify,
    undecided,
)


def _client_hello(server_name: str | None) -> bytes:
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=server_name)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def test_tls_server_name() -> None:
    """The SNI of a real ClientHello is found, lower-cased; a partial record asks for more."""
    hello = _client_hello("API.Example.com")
    assert classify(hello) == Opening(Kind.TLS, "api.example.com")
    with pytest.raises(NeedMore):
        classify(hello[:40])
    assert undecided(hello[:40]).kind is Kind.UNDECIDED


def test_tls_without_server_name() -> None:
    """A ClientHello without SNI (connecting by address) names no host."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    assert classify(outgoing.read()) == Opening(Kind.TLS, None)


def test_http_request_lines() -> None:
    """A request line is HTTP however a lenient server would take it (bare LF, lower
    case, leading empty lines, HTTP/2's preface); a line still arriving asks for more."""
    for line in (b"GET /x HTTP/1.1\r\n", b"GET /x HTTP/1.1\n", b"get  /x  http/1.1\r\n",
                 b"\r\nGET / HTTP/1.0\r\n", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"):
        assert classify(line).kind is Kind.HTTP, line
    for partial in (b"GE", b"GET /x HTTP/1.1", b"\r\n"):
        with pytest.raises(NeedMore):
            classify(partial)


def test_other_protocols_and_cut_short_openings() -> None:
    """Text lines that are no request line and binary openings are other protocols at
    once; an opening the client stopped sending is refused unless it sent nothing."""
    assert classify(b"SSH-2.0-OpenSSH_9.2\r\n").kind is Kind.OTHER
    assert classify(b"\x00\x00\x00\x08\x04\xd2\x16\x2f").kind is Kind.OTHER  # postgres
    assert classify(b"GET /x HTTP/1.1\x00").kind is Kind.OTHER
    assert undecided(b"").kind is Kind.OTHER  # a server that speaks first
    assert undecided(b"GET /x HTTP/1.1").kind is Kind.UNDECIDED
