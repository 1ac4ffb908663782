"""envd in a real sandbox answers what a client got wrong with a 4xx and an error body in
the shape its protocol uses (Connect's ``{"code": "<name>", "message"}`` for RPCs, E2B's
``{"code": <status>, "message"}`` for ``/files``), never a 500: a path too long for the
kernel, a write to the read-only ``/proc/sys``, a body that is not the request message,
a procedure envd does not serve; each fails with envd before it knew them."""

from __future__ import annotations

import json

import httpx
import pytest
from backend_harness import Sandbox, SandboxFactory

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

LONG = "/tmp/" + "a" * 300  # a component over NAME_MAX: ENAMETOOLONG
DEEP = "/tmp/" + "d/" * 2100  # a path over PATH_MAX: ENAMETOOLONG
READ_ONLY = "/proc/sys/kernel/hostname"  # /proc/sys is mounted read-only: EROFS
READ_ONLY_DIR = "/sys/bac"  # so is /sys: a directory made there is EROFS


@pytest.fixture
async def envd(make_sandbox: SandboxFactory) -> Sandbox:
    return await make_sandbox()


def _connect_error(response: httpx.Response) -> tuple[int, str]:
    assert response.headers["content-type"].startswith("application/json"), response.text
    body = json.loads(response.content)
    assert isinstance(body["message"], str) and body["message"], body
    return response.status_code, body["code"]


@pytest.mark.parametrize(("path", "body", "status", "code"), [
    ("/filesystem.Filesystem/Stat", {"path": LONG}, 400, "invalid_argument"),
    ("/filesystem.Filesystem/Stat", {"path": DEEP}, 400, "invalid_argument"),
    ("/filesystem.Filesystem/MakeDir", {"path": LONG}, 400, "invalid_argument"),
    ("/filesystem.Filesystem/ListDir", {"path": LONG, "depth": 1}, 400, "invalid_argument"),
    ("/filesystem.Filesystem/MakeDir", {"path": READ_ONLY_DIR}, 403, "permission_denied"),
    ("/filesystem.Filesystem/Remove", {"path": READ_ONLY}, 403, "permission_denied"),
    ("/filesystem.Filesystem/Stat", b"{not json", 400, "invalid_argument"),
    ("/filesystem.Filesystem/Stat", b'{"path": 5}', 400, "invalid_argument"),
    ("/process.Process/List", b"[1, 2]", 400, "invalid_argument"),
    ("/filesystem.Filesystem/NoSuch", {}, 404, "unimplemented"),
    ("/process.Process/NoSuch", {}, 404, "unimplemented"),
    ("/nosuch.Service/Method", {}, 404, "unimplemented"),
])
async def test_rpc_client_errors_are_4xx_with_a_connect_code(
        envd: Sandbox, path: str, body: dict[str, object] | bytes, status: int,
        code: str) -> None:
    """Each unary call a client got wrong: the status Connect gives its code, and the
    code in Connect's error body."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with httpx.AsyncClient(trust_env=False) as client:
        response = await client.post(
            f"{envd.envd_url}{path}", content=content,
            headers={"Content-Type": "application/json", "Connect-Protocol-Version": "1"})
    assert _connect_error(response) == (status, code), response.text


@pytest.mark.parametrize(("method", "path", "status"), [
    ("POST", LONG, 400), ("GET", LONG, 400), ("POST", DEEP, 400), ("GET", DEEP, 400),
    ("POST", READ_ONLY, 403), ("POST", f"{READ_ONLY_DIR}/new", 403),
    ("POST", "/proc/sys/kernel/bac/new", 404),
])
async def test_file_transfer_client_errors_are_4xx(envd: Sandbox, method: str, path: str,
                                                   status: int) -> None:
    """Uploads and downloads a client got wrong: 4xx with E2B's ``{"code": <status>}``."""
    async with httpx.AsyncClient(trust_env=False) as client:
        if method == "POST":
            response = await client.post(f"{envd.envd_url}/files", params={"path": path},
                                         files={"file": ("f", b"data")})
        else:
            response = await client.get(f"{envd.envd_url}/files", params={"path": path})
    assert response.status_code == status, response.text
    assert response.json()["code"] == status


async def test_the_sdk_sees_the_client_errors(envd: Sandbox) -> None:
    """Through the official SDK a too-long path is an invalid argument, not a server
    failure."""
    from e2b import InvalidArgumentException

    with pytest.raises(InvalidArgumentException):
        await envd.sdk.files.write(LONG, "x")
    with pytest.raises(InvalidArgumentException):
        await envd.sdk.files.get_info(LONG)
