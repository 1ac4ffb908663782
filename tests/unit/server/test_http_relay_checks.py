"""Which host an HTTP/1 request is for, as the egress relay decides it, and the requests
it refuses because a site could read them another way."""

from __future__ import annotations

import h11
import pytest

from bac_server.backends.namespaces.network._http_relay import Refused, request_host


def _request(head: bytes) -> h11.Request:
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(head)
    event = conn.next_event()
    assert isinstance(event, h11.Request)
    return event


@pytest.mark.parametrize(("head", "host"), [
    (b"GET /x HTTP/1.1\r\nHost: Site.Test.:8080\r\n\r\n", "site.test"),
    (b"GET http://site.test/x HTTP/1.1\r\nHost: site.test\r\n\r\n", "site.test"),
    (b"GET http://site.test:80/x HTTP/1.1\r\nHost: site.test\r\n\r\n", "site.test"),
    (b"GET https://site.test/x HTTP/1.1\r\nHost: site.test:443\r\n\r\n", "site.test"),
    (b"CONNECT site.test:443 HTTP/1.1\r\nHost: site.test:443\r\n\r\n", "site.test"),
    (b"OPTIONS * HTTP/1.1\r\nHost: site.test\r\n\r\n", "site.test"),
    (b"GET / HTTP/1.1\r\nHost: 198.51.100.10\r\n\r\n", "198.51.100.10"),
    (b"GET / HTTP/1.1\r\nHost: [2001:db8::1]:80\r\n\r\n", None),
    (b"GET / HTTP/1.0\r\n\r\n", None),
])
def test_the_host_a_request_is_for(head: bytes, host: str | None) -> None:
    """Host's name, lower-case and without port or final dot; an absolute URL or CONNECT
    naming the same host and port; None where only the address decides."""
    assert request_host(_request(head)) == host


@pytest.mark.parametrize("head", [
    b"GET http://evil.test/x HTTP/1.1\r\nHost: site.test\r\n\r\n",
    b"GET http://site.test:8080/x HTTP/1.1\r\nHost: site.test\r\n\r\n",
    b"GET http://user@site.test/x HTTP/1.1\r\nHost: site.test\r\n\r\n",
    b"GET ftp://site.test/x HTTP/1.1\r\nHost: site.test\r\n\r\n",
    b"GET http://site.test/x HTTP/1.0\r\n\r\n",
    b"CONNECT evil.test:443 HTTP/1.1\r\nHost: site.test:443\r\n\r\n",
    b"CONNECT site.test HTTP/1.1\r\nHost: site.test\r\n\r\n",
    b"GET x HTTP/1.1\r\nHost: site.test\r\n\r\n",
    b"GET * HTTP/1.1\r\nHost: site.test\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: site.test\r\nContent-Length: 3\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: site.test/evil\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: site.test:99999\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: \r\n\r\n",
    b"GET / HTTP/2.0\r\nHost: site.test\r\n\r\n",
])
def test_requests_read_two_ways_are_refused(head: bytes) -> None:
    """A target naming another host, port, scheme or user, a bare name, CONNECT to
    another host or without a port, both framings, a Host that is not one, HTTP/2."""
    with pytest.raises(Refused):
        request_host(_request(head))
