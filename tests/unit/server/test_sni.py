"""The host name a connection opens with: TLS SNI from a real ClientHello (made by the
ssl module), the HTTP Host header, and openings that name nothing."""

from __future__ import annotations

import ssl

import pytest

from bac_server.backends.namespaces.network._sni import NeedMore, opening_host


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
    assert opening_host(hello) == "api.example.com"
    with pytest.raises(NeedMore):
        opening_host(hello[:40])


def test_tls_without_server_name() -> None:
    """A ClientHello without SNI (connecting by address) names no host."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    assert opening_host(outgoing.read()) is None


def test_http_host_header() -> None:
    """The Host header of an HTTP/1 request head, without its port; a head still
    arriving asks for more; other protocols name nothing."""
    assert opening_host(b"GET /x HTTP/1.1\r\nAccept: */*\r\nHOST: Site.Test:8080\r\n\r\n") \
        == "site.test"
    with pytest.raises(NeedMore):
        opening_host(b"GET /x HTTP/1.1\r\nHost: site.te")
    with pytest.raises(NeedMore):
        opening_host(b"GE")
    assert opening_host(b"SSH-2.0-OpenSSH_9.2\r\n") is None
    assert opening_host(b"\x00\x01binary") is None
