"""Access token, signed /files URLs and raw /files requests (what the SDK does not send)."""

from __future__ import annotations

import gzip
import json
import socket
import time
from pathlib import Path

import httpx
import pytest
from e2b import ConnectionConfig, Sandbox
from envd_harness import Envd
from packaging.version import Version

from bac_protocol.signing import sign

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]
UNAUTHORIZED = {
    "code": 401,
    "message": "unauthorized access, please provide a valid access token or method signing "
    "if supported",
}
RPC_HEADERS = {"Content-Type": "application/json", "Connect-Protocol-Version": "1"}


def secured_sandbox(envd: Envd) -> Sandbox:
    """An SDK client holding the envd token, as one created through the API would."""
    assert envd.token is not None
    config = ConnectionConfig(
        debug=True,
        sandbox_url=envd.url,
        extra_sandbox_headers={"X-Access-Token": envd.token},
    )
    return Sandbox(
        sandbox_id="tokensandbox",
        sandbox_domain=None,
        envd_version=Version("0.6.13"),
        envd_access_token=envd.token,
        traffic_access_token=None,
        connection_config=config,
    )


def test_requests_without_the_token_are_rejected(secured_envd: Envd) -> None:
    """RPCs, /envs and /metrics without (or with a wrong) token get E2B's 401 JSON body."""
    url = secured_envd.url
    for headers in ({}, {"X-Access-Token": "wrong"}):
        rpc = httpx.post(
            f"{url}/process.Process/List", content=b"{}", headers={**RPC_HEADERS, **headers}
        )
        assert (rpc.status_code, rpc.json()) == (401, UNAUTHORIZED)
        for route in ("/envs", "/metrics"):
            response = httpx.get(f"{url}{route}", headers=headers)
            assert (response.status_code, response.json()) == (401, UNAUTHORIZED)
    assert httpx.get(f"{url}/health").status_code == 204


def test_requests_with_the_token_pass(secured_envd: Envd) -> None:
    """The right X-Access-Token opens RPCs and the plain routes."""
    headers = {**RPC_HEADERS, "X-Access-Token": secured_envd.token or ""}
    assert (
        httpx.post(
            f"{secured_envd.url}/process.Process/List", content=b"{}", headers=headers
        ).status_code
        == 200
    )
    metrics = httpx.get(f"{secured_envd.url}/metrics", headers=headers).json()
    assert metrics["cpu_count"] >= 1 and metrics["mem_total"] > 0


def test_sdk_with_the_token_works_end_to_end(secured_envd: Envd) -> None:
    """The official SDK carrying the token runs commands and moves files."""
    sandbox = secured_sandbox(secured_envd)
    assert sandbox.commands.run("echo secured").stdout == "secured\n"
    sandbox.files.write(str(secured_envd.workdir / "s.txt"), "ok")
    assert sandbox.files.read(str(secured_envd.workdir / "s.txt")) == "ok"


def test_reinit_needs_the_current_token(secured_envd: Envd) -> None:
    """Once a token is set, /init without it is refused (code in the sandbox cannot take over)."""
    hijack = httpx.post(f"{secured_envd.url}/init", json={"accessToken": "mine"})
    assert (hijack.status_code, hijack.json()) == (401, UNAUTHORIZED)
    again = httpx.post(
        f"{secured_envd.url}/init",
        json={"envVars": {"ADDED": "1"}},
        headers={"X-Access-Token": secured_envd.token or ""},
    )
    assert again.status_code == 204 and again.headers["x-envd-version"] == "0.6.13"
    envs = httpx.get(
        f"{secured_envd.url}/envs", headers={"X-Access-Token": secured_envd.token or ""}
    )
    assert envs.json()["ADDED"] == "1"


def test_signed_download_and_upload_urls(secured_envd: Envd) -> None:
    """SDK-signed URLs work without the token header, for reads and writes."""
    sandbox = secured_sandbox(secured_envd)
    path = str(secured_envd.workdir / "signed.txt")
    upload = httpx.post(
        sandbox.upload_url(path, use_signature_expiration=60), files={"file": ("x", b"via url")}
    )
    assert upload.status_code == 200, upload.text
    assert upload.json()[0]["path"] == path
    download = httpx.get(sandbox.download_url(path, use_signature_expiration=60))
    assert (download.status_code, download.content) == (200, b"via url")
    assert httpx.get(sandbox.download_url(path)).content == b"via url"


def test_expired_and_bad_signatures_get_exact_401_bodies(secured_envd: Envd) -> None:
    """Expired, missing and wrong signatures each get E2B envd's exact 401 message."""
    token, path = secured_envd.token or "", str(secured_envd.workdir / "x")
    expired = int(time.time()) - 10
    signature = sign(path, "read", "", token, expired)
    params = {"path": path, "signature": signature, "signature_expiration": str(expired)}
    response = httpx.get(f"{secured_envd.url}/files", params=params)
    assert (response.status_code, response.json()) == (
        401,
        {"code": 401, "message": "signature is already expired"},
    )
    missing = httpx.get(f"{secured_envd.url}/files", params={"path": path})
    assert missing.json() == {"code": 401, "message": "missing signature query parameter"}
    wrong = httpx.get(f"{secured_envd.url}/files", params={"path": path, "signature": "v1_x"})
    assert wrong.json() == {"code": 401, "message": "invalid signature"}
    write_sig = sign(path, "write", "", token, None)  # a write signature cannot read
    reused = httpx.get(f"{secured_envd.url}/files", params={"path": path, "signature": write_sig})
    assert reused.json() == {"code": 401, "message": "invalid signature"}
    bad_header = httpx.get(
        f"{secured_envd.url}/files", params={"path": path}, headers={"X-Access-Token": "no"}
    )
    assert bad_header.json()["message"] == "access token present in header but does not match"


def test_unknown_user_on_files_is_401(envd: Envd) -> None:
    """username= naming a user the sandbox lacks is refused with 401."""
    response = httpx.get(f"{envd.url}/files", params={"path": "/etc/hostname", "username": "ghost"})
    assert response.status_code == 401 and "ghost" in response.json()["message"]


def test_raw_octet_stream_gzip_upload(envd: Envd, workdir: Path) -> None:
    """A gzip-encoded octet-stream body is gunzipped; the reply is a one-entry JSON list."""
    payload = b"raw body " * 1000
    response = httpx.post(
        f"{envd.url}/files",
        params={"path": str(workdir / "raw.txt")},
        content=gzip.compress(payload),
        headers={"Content-Type": "application/octet-stream", "Content-Encoding": "gzip"},
    )
    assert response.json() == [
        {"path": str(workdir / "raw.txt"), "name": "raw.txt", "type": "file"}
    ]
    assert (workdir / "raw.txt").read_bytes() == payload


def test_upload_errors_are_clear_400s(envd: Envd, workdir: Path) -> None:
    """Bad content type, octet-stream without path, duplicate targets, bad metadata: 400."""
    url = f"{envd.url}/files"
    cases = [
        httpx.post(url, content=b"x", headers={"Content-Type": "text/plain"}),
        httpx.post(url, content=b"x", headers={"Content-Type": "application/octet-stream"}),
        httpx.post(
            url, files=[("file", (str(workdir / "d"), b"1")), ("file", (str(workdir / "d"), b"2"))]
        ),
        httpx.post(
            url,
            params={"path": str(workdir / "m")},
            files={"file": ("m", b"1")},
            headers={"X-Metadata-Bad": "tab\there"},
        ),
        httpx.post(
            url,
            content=b"not gzip",
            params={"path": str(workdir / "g")},
            headers={"Content-Type": "application/octet-stream", "Content-Encoding": "gzip"},
        ),
    ]
    for response in cases:
        assert response.status_code == 400, response.text
        assert response.json()["code"] == 400 and response.json()["message"]


def test_download_range_and_encoding(envd: Envd, workdir: Path) -> None:
    """Range gives 206 with the slice; gzip is used when accepted; identity;q=0 alone is 406."""
    (workdir / "r.txt").write_bytes(b"0123456789")
    url = f"{envd.url}/files"
    params = {"path": str(workdir / "r.txt")}
    ranged = httpx.get(url, params=params, headers={"Range": "bytes=2-5"})
    assert (ranged.status_code, ranged.content) == (206, b"2345")
    assert ranged.headers["content-range"] == "bytes 2-5/10"
    zipped = httpx.get(url, params=params, headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip" and zipped.content == b"0123456789"
    plain = httpx.get(url, params=params, headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.content == b"0123456789"
    refused = httpx.get(url, params=params, headers={"Accept-Encoding": "br, identity;q=0"})
    assert refused.status_code == 406


def test_unknown_route_and_method(envd: Envd) -> None:
    """Unknown paths are 404 JSON; a wrong method on a known route is 405."""
    assert httpx.get(f"{envd.url}/nope").json() == {"code": 404, "message": "no route for /nope"}
    assert httpx.delete(f"{envd.url}/files").status_code == 405


def _read_response(sock: socket.socket) -> tuple[bytes, bytes]:
    """One HTTP response (its body framed by Content-Length, if any): head and body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed mid-response: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "the connection closed mid-body"
        body += chunk
    return head, body


def test_a_refusal_sent_before_the_body_keeps_the_connection(secured_envd: Envd) -> None:
    """A 401 answered before the request's body arrived (clients send the head and the
    body as separate writes) leaves a keep-alive connection usable: envd reads past the
    body it refused instead of closing what the client was told it could reuse."""
    with socket.create_connection(("127.0.0.1", secured_envd.port)) as sock:
        sock.sendall(b"POST /process.Process/List HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n")
        head, body = _read_response(sock)  # answered before the body was sent
        assert head.startswith(b"HTTP/1.1 401 ") and json.loads(body) == UNAUTHORIZED
        assert b"connection: close" not in head.lower()
        sock.sendall(b"{}")
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        head, _ = _read_response(sock)
        assert head.startswith(b"HTTP/1.1 204 ")


def test_a_refused_body_too_long_to_read_ends_its_connection_only(secured_envd: Envd) -> None:
    """Past 1 MiB of a body already refused, envd closes that connection rather than read
    on; envd itself goes on serving."""
    with socket.create_connection(("127.0.0.1", secured_envd.port)) as sock:
        sock.sendall(b"POST /process.Process/List HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 4194304\r\n\r\n")
        head, _ = _read_response(sock)
        assert head.startswith(b"HTTP/1.1 401 ")
        answer = b""
        try:
            for _ in range(64):
                sock.sendall(b"x" * 65536)
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = sock.recv(65536)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while the body was still going out
        assert answer == b"", "envd read a 4 MiB refused body to its end"
    assert httpx.get(f"{secured_envd.url}/health").status_code == 204
