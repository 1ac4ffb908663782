"""The volume routes and the volume content API over plain HTTP: every answer, success and
error, conforms to spec/openapi.yaml; the content API's errors carry a string code;
odd input is a 4xx, never a 500."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from bac_process import ServerProcess
from openapi_check import check

pytestmark = pytest.mark.root

_C = "/volumecontent/{volumeID}"


@pytest.fixture
def volume(api: httpx.Client) -> Iterator[dict[str, str]]:
    made = api.post("/volumes", json={"name": f"spec-{uuid.uuid4().hex[:8]}"})
    check("POST", "/volumes", made)
    assert made.status_code == 201
    yield made.json()
    api.delete(f"/volumes/{made.json()['volumeID']}")


def test_volume_routes_conform(api: httpx.Client, server: ServerProcess,
                               volume: dict[str, str]) -> None:
    """Create, list, get, destroy and their errors answer what the spec says."""
    vid = volume["volumeID"]
    check("GET", "/volumes", api.get("/volumes"))
    got = api.get(f"/volumes/{vid}")
    check("GET", "/volumes/{volumeID}", got)
    assert got.json()["token"] == volume["token"]
    for body in ({"name": volume["name"]}, {"name": ""}, {"name": "a/b"}, {"nom": "x"}, {}):
        refused = api.post("/volumes", json=body)
        check("POST", "/volumes", refused)
        assert refused.status_code in (400, 409)
    other = httpx.get(f"{server.url}/volumes/{vid}", headers={"X-API-KEY": server.keys[1]})
    check("GET", "/volumes/{volumeID}", other)
    assert other.status_code == 404
    check("DELETE", "/volumes/{volumeID}", api.delete("/volumes/nosuchvolume"))


def test_content_routes_conform_and_errors_have_string_codes(
        api: httpx.Client, volume: dict[str, str]) -> None:
    """Each content route's success and errors match the spec; errors are
    ``{"code": "<word>", "message"}``; a wrong token, a missing one and an unknown
    volume are the same 401."""
    base = f"/volumecontent/{volume['volumeID']}"
    auth = {"Authorization": f"Bearer {volume['token']}"}

    def call(method: str, route: str, expect: int, **kw: object) -> httpx.Response:
        response = api.request(method, base + route, headers=auth, **kw)  # type: ignore[arg-type]
        check(method, _C + route, response)
        assert response.status_code == expect, response.text
        if expect >= 400:
            assert isinstance(response.json()["code"], str)
        return response

    call("PUT", "/file", 201, params={"path": "/a/b.txt", "mode": 0o600}, content=b"x" * 10)
    assert call("GET", "/file", 200, params={"path": "/a/b.txt"}).content == b"x" * 10
    call("GET", "/file", 404, params={"path": "/nope"})
    call("GET", "/file", 400, params={"path": "/a"})
    call("GET", "/file", 400, params={})
    call("POST", "/dir", 201, params={"path": "/d"})
    assert call("POST", "/dir", 409, params={"path": "/d"}).json()["code"] == "conflict"
    call("POST", "/dir", 404, params={"path": "/x/y"})
    call("POST", "/dir", 400, params={"path": "/e", "uid": "-1"})
    call("POST", "/dir", 400, params={"path": "/e", "mode": "99999"})
    call("POST", "/dir", 400, params={"path": "/e", "force": "maybe"})
    assert len(call("GET", "/dir", 200, params={"path": "/", "depth": 2}).json()) == 3
    call("GET", "/dir", 400, params={"path": "/", "depth": 0})
    call("GET", "/dir", 404, params={"path": "/none"})
    call("GET", "/dir", 400, params={"path": "/a/b.txt"})
    assert call("GET", "/path", 200, params={"path": "/a/b.txt"}).json()["mode"] == 0o600
    call("PATCH", "/path", 200, params={"path": "/a/b.txt"}, json={"uid": 0, "mode": 0o644})
    call("PATCH", "/path", 400, params={"path": "/a/b.txt"}, json={"uid": "root"})
    call("PATCH", "/path", 404, params={"path": "/gone"}, json={})
    call("DELETE", "/path", 400, params={"path": "/"})
    call("DELETE", "/path", 204, params={"path": "/a"})
    call("DELETE", "/path", 404, params={"path": "/a"})
    call("GET", "/path", 400, params={"path": "/a\x00b"})
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}):
        refused = api.get(base + "/path", params={"path": "/"}, headers=headers)
        check("GET", _C + "/path", refused)
        assert (refused.status_code, refused.json()["code"]) == (401, "unauthorized")
    unknown = api.get("/volumecontent/nosuchvolume/path", params={"path": "/"}, headers=auth)
    assert unknown.status_code == 401
