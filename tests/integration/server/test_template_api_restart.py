"""Template builds on their own server (two builds at once, a 1 MiB upload limit):
concurrent builds of one template, upload limits, pinned sandboxes, and a SIGKILL in the
middle of a build."""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest
from bac_process import ServerProcess, fresh_data_dir, remove_data_dir
from openapi_check import check
from template_api_client import (
    TPL,
    build,
    context_tar,
    request_build,
    start,
    status,
    unique,
    wait,
)

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    srv = ServerProcess(fresh_data_dir("template-restart"),
                        extra_env={"BAC_TEMPLATE_BUILDS": "2", "BAC_MAX_UPLOAD_MB": "1"})
    srv.start()
    srv.create_key("builder")
    try:
        yield srv
    finally:
        srv.kill_all_sandboxes()
        srv.stop()
    remove_data_dir(srv)


@pytest.fixture
def api(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers={"X-API-KEY": server.keys[0]},
                      timeout=60) as client:
        yield client


def _run(command: str) -> dict[str, object]:
    return {"type": "RUN", "args": [command, "root"]}


def test_later_build_keeps_the_tag_when_the_earlier_one_ends_after_it(
        api: httpx.Client) -> None:
    """Two builds of one template run at once; the later-requested one ends first and takes
    the tag, the earlier one ends ready later but does not take it back; both are intact."""
    name = unique("race")
    marker = unique("m")
    early = request_build(api, name)
    late = request_build(api, name)
    template_id = early["templateID"]
    assert late["templateID"] == template_id
    # The early build's step is the slow one (a workload, not synchronisation).
    assert start(api, template_id, early["buildID"], {"fromTemplate": "base", "steps": [
        _run(f"echo early-{marker} > /which; sleep 8")]}).status_code == 202
    assert start(api, template_id, late["buildID"], {"fromTemplate": "base", "steps": [
        _run(f"echo late-{marker} > /which")]}).status_code == 202
    assert wait(api, template_id, late["buildID"])["status"] == "ready"
    assert wait(api, template_id, early["buildID"])["status"] == "ready"
    builds = api.get(f"/templates/{template_id}").json()["builds"]
    finished = {b["buildID"]: b["finishedAt"] for b in builds}
    assert finished[early["buildID"]] > finished[late["buildID"]]
    tags = {t["tag"]: t["buildID"] for t in api.get(f"/templates/{template_id}/tags").json()}
    assert tags == {"default": late["buildID"]}
    created = api.post("/v2/sandboxes", json={"templateID": name})
    assert created.status_code == 201, created.text
    sandbox_id = created.json()["sandboxID"]
    try:
        from e2b import Sandbox

        sbx = Sandbox.connect(sandbox_id, api_key=api.headers["X-API-KEY"],
                              api_url=str(api.base_url), sandbox_url=str(api.base_url))
        assert sbx.commands.run("cat /which").stdout == f"late-{marker}\n"
    finally:
        api.delete(f"/sandboxes/{sandbox_id}")


def test_upload_over_the_limit_is_413_and_leaves_nothing(server: ServerProcess,
                                                         api: httpx.Client) -> None:
    """An upload larger than BAC_MAX_UPLOAD_MB is refused (413) and is not cached."""
    requested = request_build(api, unique("big"))
    data, files_hash = context_tar({"big.bin": os.urandom(2 << 20)})  # gzip cannot shrink it
    link = api.get(f"/templates/{requested['templateID']}/files/{files_hash}").json()
    refused = httpx.put(link["url"], content=data, timeout=60)
    check("PUT", TPL + "/files/{hash}", refused)
    assert refused.status_code == 413, refused.text
    again = api.get(f"/templates/{requested['templateID']}/files/{files_hash}").json()
    assert again["present"] is False
    leftovers = list((server.data_dir / "template-uploads").rglob("*"))
    assert not [p for p in leftovers if p.is_file()], leftovers


def test_paused_sandbox_resumes_on_its_build_after_a_rebuild(api: httpx.Client) -> None:
    """A sandbox paused (files only) resumes on the layers it was created from, although its
    template was rebuilt and then deleted meanwhile."""
    name = unique("pinned")
    build(api, name, [_run("echo one > /version")])
    created = api.post("/v2/sandboxes", json={"templateID": name})
    assert created.status_code == 201, created.text
    sandbox_id = created.json()["sandboxID"]
    try:
        _tid, _bid, rebuilt = build(api, name, [_run("echo two > /version")])
        assert rebuilt["status"] == "ready"
        assert api.delete(f"/templates/{name}").status_code == 204
        paused = api.post(f"/sandboxes/{sandbox_id}/pause", json={"memory": False})
        assert paused.status_code == 204, paused.text
        resumed = api.post(f"/v2/sandboxes/{sandbox_id}/connect", json={"timeout": 60})
        assert resumed.status_code == 201, resumed.text
        from e2b import Sandbox

        sbx = Sandbox.connect(sandbox_id, api_key=api.headers["X-API-KEY"],
                              api_url=str(api.base_url), sandbox_url=str(api.base_url))
        assert sbx.commands.run("cat /version").stdout == "one\n"
    finally:
        api.delete(f"/sandboxes/{sandbox_id}")


def test_restart_ends_the_interrupted_build_in_error(server: ServerProcess,
                                                     api: httpx.Client) -> None:
    """SIGKILL during a build: after the restart the build is in error ("server restarted"),
    its template serves nothing, and a new build of it works."""
    name = unique("restart")
    marker = unique("m")
    requested = request_build(api, name)
    template_id, build_id = requested["templateID"], requested["buildID"]
    assert start(api, template_id, build_id, {"fromTemplate": "base", "steps": [
        _run(f"echo {marker}; sleep 600")]}).status_code == 202
    running = wait(api, template_id, build_id, until=("building",))
    assert running["status"] == "building"
    server.kill9()
    server.start()
    done = status(api, template_id, build_id)
    assert done["status"] == "error" and done["reason"]["message"] == "server restarted"
    assert api.post("/v2/sandboxes", json={"templateID": name}).status_code == 404
    _tid, _bid, again = build(api, name, [_run("true")])
    assert again["status"] == "ready"
