"""The template API on a real server: every operation answers what spec/openapi.yaml says
(success and error), builds run for real, and bad input gets a clear 4xx or a failed build
that names what is wrong."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import httpx
import pytest
from bac_process import ServerProcess
from openapi_check import check
from template_api_client import (
    BUILD,
    TPL,
    build,
    request_build,
    start,
    status,
    unique,
    upload,
    wait,
)

pytestmark = pytest.mark.root


@pytest.fixture
def beta(server: ServerProcess) -> Iterator[httpx.Client]:
    """A client of another team."""
    with httpx.Client(base_url=server.url, headers={"X-API-KEY": server.keys[1]},
                      timeout=60) as client:
        yield client


def _sandbox(api: httpx.Client, template: str) -> httpx.Response:
    created = api.post("/v2/sandboxes", json={"templateID": template})
    check("POST", "/v2/sandboxes", created)
    return created


def test_build_flow_and_management_responses_conform(api: httpx.Client) -> None:
    """Upload cache, build, status and logs, listings, tags, visibility, a sandbox from the
    template, and delete all answer per the spec."""
    name = unique("flow")
    requested = request_build(api, name, tags=["v1"], cpuCount=1, memoryMB=640)
    assert requested["tags"] == ["default", "v1"] and requested["names"] == [name]
    template_id, build_id = requested["templateID"], requested["buildID"]
    files_hash = upload(api, template_id, {"note.txt": b"uploaded\n"})
    link = api.get(f"/templates/{template_id}/files/{files_hash}")
    check("GET", TPL + "/files/{hash}", link)
    assert link.json() == {"present": True}
    steps = [{"type": "COPY", "args": ["note.txt", "/opt/note.txt", "", "0640"],
              "filesHash": files_hash},
             {"type": "RUN", "args": ["echo from-run > /opt/run.txt", "root"]},
             {"type": "ENV", "args": ["FLOW", "yes"]}]
    assert start(api, template_id, build_id,
                 {"fromTemplate": "base", "steps": steps}).status_code == 202
    done = wait(api, template_id, build_id)
    assert done["status"] == "ready", done.get("reason")
    first = status(api, template_id, build_id, logsOffset=0, limit=2)
    assert len(first["logEntries"]) == 2 and "reason" not in first
    rest = status(api, template_id, build_id, logsOffset=2)
    assert rest["logEntries"] and all(e["level"] in ("info", "debug") for e in
                                      rest["logEntries"])
    assert status(api, template_id, build_id, level="error")["logEntries"] == []

    logs = api.get(f"/templates/{template_id}/builds/{build_id}/logs",
                   params={"direction": "backward", "limit": 3})
    check("GET", BUILD + "/logs", logs)
    assert len(logs.json()["logs"]) == 3
    tags = api.get(f"/templates/{name}/tags")
    check("GET", TPL + "/tags", tags)
    assert {t["tag"] for t in tags.json()} == {"default", "v1"}

    listed = api.get("/templates")
    check("GET", "/templates", listed)
    by_id = {t["templateID"]: t for t in listed.json()}
    assert by_id["base"]["public"] is True
    assert (by_id[template_id]["cpuCount"], by_id[template_id]["memoryMB"]) == (1, 640)
    paged = api.get("/v2/templates", params={"limit": 1})
    check("GET", "/v2/templates", paged)
    assert len(paged.json()) == 1 and paged.headers["X-Next-Token"]
    detail = api.get(f"/templates/{template_id}")
    check("GET", TPL, detail)
    assert [b["buildID"] for b in detail.json()["builds"]] == [build_id]
    for path in (TPL, "/v2" + TPL):
        patched = api.patch(path.replace("{templateID}", template_id), json={"public": True})
        check("PATCH", path, patched)
        assert patched.json() == {"names": [name]}
    alias = api.get(f"/templates/aliases/{name}")
    check("GET", "/templates/aliases/{alias}", alias)
    assert alias.json() == {"templateID": template_id, "public": True}

    created = _sandbox(api, f"{name}:v1")
    assert created.status_code == 201, created.text
    sandbox_id = created.json()["sandboxID"]
    detail_sbx = api.get(f"/sandboxes/{sandbox_id}").json()
    assert (detail_sbx["templateID"], detail_sbx["cpuCount"]) == (template_id, 1)
    deleted = api.delete(f"/templates/{template_id}")
    check("DELETE", TPL, deleted)
    again = api.delete(f"/templates/{template_id}")
    check("DELETE", TPL, again)
    assert (deleted.status_code, again.status_code) == (204, 404)
    # The sandbox keeps its layers: it still works after its template is gone.
    headers = {"E2b-Sandbox-Id": sandbox_id, "E2b-Sandbox-Port": "49983"}
    assert api.get("/health", headers=headers).status_code == 204
    api.delete(f"/sandboxes/{sandbox_id}")
    assert _sandbox(api, name).status_code == 404


@pytest.mark.parametrize(("body", "message"), [
    ({"fromTemplate": "base", "steps": [{"type": "FROB", "args": []}]},
     "step 1: unknown step type 'FROB'"),
    ({"fromTemplate": "base", "fromImage": "debian:bookworm"}, "not both"),
    ({"steps": []}, "missing fromImage or fromTemplate"),
    ({"fromTemplate": "base", "steps": [{"type": "RUN", "args": ["true"]},
                                        {"type": "RUN", "args": ["a", "b", "c"]}]},
     "step 2 (RUN): args must be [command] or [command, user], got 3"),
    ({"fromTemplate": "base", "steps": [{"type": "COPY", "args": ["a", "/b"]}]},
     "step 1 (COPY): missing filesHash"),
    ({"fromTemplate": "base", "steps": [{"type": "COPY", "args": ["a", "/b", "", "9z"],
                                         "filesHash": "ab" * 32}]}, "mode '9z' is not octal"),
    ({"fromTemplate": "base", "steps": [{"type": "ENV", "args": ["A"]}]},
     "step 1 (ENV): args must be key, value pairs"),
    ({"fromImage": "x", "fromImageRegistry": {"type": "aws", "awsAccessKeyId": "k"}},
     "type 'aws' is not supported"),
    ({"fromTemplate": "base", "startCmd": "x", "extra": 1}, "unknown field 'extra'"),
])
def test_bad_build_requests_are_400_naming_the_problem(api: httpx.Client, body: dict[str, object],
                                                       message: str) -> None:
    """Each malformed build start is a documented 400 whose message says what is wrong, and
    the build can still be started properly afterwards."""
    requested = request_build(api, unique("bad"))
    refused = start(api, requested["templateID"], requested["buildID"], body)
    assert refused.status_code == 400 and message in refused.json()["message"], refused.text
    assert status(api, requested["templateID"], requested["buildID"])["status"] == "waiting"


def test_bad_template_requests_are_refused(api: httpx.Client) -> None:
    """Reserved and invalid names, another team's id and out-of-range resources are 4xx;
    a build starts only once."""
    cases = [({"name": "base"}, 409), ({"name": "code-interpreter-v1:x"}, 409),
             ({"name": "bad name!"}, 400), ({"name": "ok", "teamID": "someone-else"}, 400),
             ({"name": "ok", "cpuCount": 1000}, 400), ({"name": "ok", "tags": ["bad tag"]}, 400),
             ({}, 400)]
    for body, code in cases:
        refused = api.post("/v3/templates", json=body)
        check("POST", "/v3/templates", refused)
        assert refused.status_code == code, (body, refused.text)
    template_id, build_id, done = build(api, unique("once"), [{"type": "RUN",
                                                                "args": ["true"]}])
    assert done["status"] == "ready"
    again = start(api, template_id, build_id, {"fromTemplate": "base"})
    assert again.status_code == 409 and "already started" in again.json()["message"]


def test_copy_of_files_never_uploaded_fails_naming_them(api: httpx.Client) -> None:
    """A COPY whose files hash was never uploaded ends the build in error; the reason names
    the file and the step, and the template serves nothing."""
    name = unique("nofiles")
    steps = [{"type": "RUN", "args": ["true"]},
             {"type": "COPY", "args": ["app/config.yaml", "/etc/app/"], "filesHash": "cd" * 32}]
    _template_id, _build_id, done = build(api, name, steps)
    assert done["status"] == "error"
    assert "app/config.yaml" in done["reason"]["message"] and "never uploaded" in \
        done["reason"]["message"]
    assert done["reason"]["step"] == "2"
    assert _sandbox(api, name).status_code == 404


def test_failing_run_reports_exit_code_output_and_step(api: httpx.Client) -> None:
    """A RUN that exits non-zero fails the build; the reason has the exit code and the step,
    and its last output lines come with it."""
    _tid, _bid, done = build(api, unique("exit"), [
        {"type": "RUN", "args": ["true"]},
        {"type": "RUN", "args": ["echo marker-$((40+2)); exit 7"]}])
    assert done["status"] == "error" and done["reason"]["step"] == "2"
    assert done["reason"]["message"] == "RUN failed with exit code 7"
    assert any("marker-42" in e["message"] for e in done["reason"]["logEntries"])


def test_from_naming_nothing_fails_at_base_with_what_it_may_mean(api: httpx.Client) -> None:
    """FROM a name that is neither a template nor an image fails at `base` saying so,
    with the template names it may have meant, whether it came as an image (as E2B's
    conversion and the SDK send a name no template has) or as a template; FROM a template
    whose only build failed says it has no ready build."""
    name = unique("nofrom")
    requested = request_build(api, name)
    template_id, build_id = requested["templateID"], requested["buildID"]
    assert start(api, template_id, build_id,
                 {"fromImage": "nosuchbase", "steps": []}).status_code == 202
    done = wait(api, template_id, build_id)
    assert (done["status"], done["reason"]["step"]) == ("error", "base")
    assert done["reason"]["message"].startswith(
        "no template or image named 'nosuchbase' (did you mean 'base'?)"), done["reason"]
    _tid, _bid, done = build(api, unique("nofrom"), [], fromTemplate="nosuchbase")
    assert done["reason"] == {"message": "no template named 'nosuchbase' (did you mean 'base'?)",
                              "step": "base", "logEntries": done["reason"]["logEntries"]}
    _tid, _bid, done = build(api, unique("nofrom"), [], fromTemplate=name)
    assert done["reason"]["message"].startswith(
        f"template {name!r} has no ready build to start from"), done["reason"]


def test_template_whose_only_build_failed_is_listed_with_why_until_deleted(
        api: httpx.Client) -> None:
    """A template whose only build failed stays listed (it was registered when the build
    was requested) with status error and the reason, in the list and on its own; delete
    removes it."""
    name = unique("failed")
    template_id, build_id, done = build(api, name, [
        {"type": "RUN", "args": ["echo nope; exit 4"]}])
    assert done["status"] == "error"
    listed = api.get("/templates")
    check("GET", "/templates", listed)
    mine = [t for t in listed.json() if t["templateID"] == template_id]
    assert len(mine) == 1 and mine[0]["buildStatus"] == "error"
    assert mine[0]["reason"] == {"message": "RUN failed with exit code 4", "step": "1"}
    one = api.get(f"/templates/{template_id}")
    check("GET", TPL, one)
    assert one.json()["reason"] == mine[0]["reason"]
    assert [(b["buildID"], b["reason"]["message"]) for b in one.json()["builds"]] == [
        (build_id, "RUN failed with exit code 4")]
    ready = [t for t in listed.json() if t["buildStatus"] == "ready"]
    assert ready and not any("reason" in t for t in ready)
    assert api.delete(f"/templates/{template_id}").status_code == 204
    assert template_id not in {t["templateID"] for t in api.get("/templates").json()}


def test_another_teams_private_template_is_not_there(api: httpx.Client,
                                                     beta: httpx.Client) -> None:
    """Another team sees a private template nowhere (404s that leak nothing) and cannot
    change it; made public it can find it and start sandboxes from it, but not its builds."""
    name = unique("tenancy")
    template_id, build_id, done = build(api, name, [{"type": "RUN", "args": ["true"]}])
    assert done["status"] == "ready"
    calls = [("GET", "/templates/aliases/{alias}", f"/templates/aliases/{name}", {}),
             ("GET", TPL, f"/templates/{template_id}", {}),
             ("GET", TPL + "/tags", f"/templates/{name}/tags", {}),
             ("GET", TPL + "/files/{hash}", f"/templates/{template_id}/files/{'ab' * 32}", {}),
             ("GET", BUILD + "/status", f"/templates/{template_id}/builds/{build_id}/status",
              {}),
             ("DELETE", BUILD, f"/templates/{template_id}/builds/{build_id}", {}),
             ("PATCH", TPL, f"/templates/{template_id}", {"json": {"public": True}}),
             ("POST", "/templates/tags", "/templates/tags",
              {"json": {"target": f"{name}:default", "tags": ["x"]}}),
             ("DELETE", TPL, f"/templates/{template_id}", {})]
    for method, documented, path, kwargs in calls:
        refused = beta.request(method, path, **kwargs)
        check(method, documented, refused)
        assert refused.status_code == 404, (path, refused.text)
    assert _sandbox(beta, name).status_code == 404
    assert _sandbox(beta, template_id).status_code == 404
    assert api.patch(f"/templates/{template_id}", json={"public": True}).status_code == 200
    assert beta.get(f"/templates/aliases/{name}").json()["public"] is True
    created = _sandbox(beta, name)
    assert created.status_code == 201, created.text
    beta.delete(f"/sandboxes/{created.json()['sandboxID']}")
    assert beta.get(f"/templates/{template_id}/builds/{build_id}/status").status_code == 404


def test_tags_assign_and_remove(api: httpx.Client) -> None:
    """Tags point at a target's build; unknown targets and tags are 404s."""
    name = unique("tags")
    _tid, build_id, _done = build(api, name, [{"type": "RUN", "args": ["true"]}])
    assigned = api.post("/templates/tags", json={"target": name, "tags": ["prod"]})
    check("POST", "/templates/tags", assigned)
    assert assigned.status_code == 201 and assigned.json() == {"tags": ["prod"],
                                                               "buildID": build_id}
    unknown = api.post("/templates/tags", json={"target": f"{name}:nosuch", "tags": ["x"]})
    check("POST", "/templates/tags", unknown)
    removed = api.request("DELETE", "/templates/tags", json={"name": name, "tags": ["prod"]})
    check("DELETE", "/templates/tags", removed)
    gone = api.request("DELETE", "/templates/tags", json={"name": name, "tags": ["prod"]})
    check("DELETE", "/templates/tags", gone)
    assert (unknown.status_code, removed.status_code, gone.status_code) == (404, 204, 404)


def test_upload_url_needs_its_token(server: ServerProcess, api: httpx.Client) -> None:
    """The PUT of an upload URL is refused without its token, with a forged one, and for
    another hash; the URL points at this server."""
    requested = request_build(api, unique("token"))
    template_id = requested["templateID"]
    link = api.get(f"/templates/{template_id}/files/{'ef' * 32}")
    url = link.json()["url"]
    assert url.startswith(server.url + "/templates/")
    token = httpx.URL(url).params["token"]
    base = f"{server.url}/templates/{template_id}/files/"
    for target in (base + "ef" * 32, base + "ef" * 32 + "?token=1.abc",
                   base + "ab" * 32 + f"?token={token}"):
        refused = httpx.put(target, content=b"x")
        check("PUT", TPL + "/files/{hash}", refused)
        assert refused.status_code == 401, refused.text
    bad_hash = api.get(f"/templates/{template_id}/files/NOT-HEX")
    assert bad_hash.status_code == 400


def test_cancel_and_live_log_follow(api: httpx.Client) -> None:
    """A follower of a running build's log gets its lines live and its stream ends when the
    build is cancelled; the build ends in error, "cancelled"; a second cancel is a 409."""
    requested = request_build(api, unique("cancel"))
    template_id, build_id = requested["templateID"], requested["buildID"]
    marker = unique("marker")
    run = f"echo {marker}; sleep 600"
    assert start(api, template_id, build_id,
                 {"fromTemplate": "base", "steps": [{"type": "RUN", "args": [run]}]}
                 ).status_code == 202
    lines: list[dict[str, str]] = []
    seen_marker = threading.Event()
    path = f"/templates/{template_id}/builds/{build_id}/logs"

    def follow() -> None:
        with api.stream("GET", path, params={"follow": "true"}, timeout=120) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("application/x-ndjson")
            for raw in stream.iter_lines():
                lines.append(json.loads(raw))
                if marker in lines[-1]["message"]:
                    seen_marker.set()

    follower = threading.Thread(target=follow)
    follower.start()
    assert seen_marker.wait(120), lines
    cancelled = api.delete(f"/templates/{template_id}/builds/{build_id}")
    check("DELETE", BUILD, cancelled)
    assert cancelled.status_code == 204
    follower.join(60)
    assert not follower.is_alive(), "the log stream did not end with the build"
    done = status(api, template_id, build_id)
    assert done["status"] == "error" and done["reason"]["message"] == "cancelled"
    assert lines[-1]["message"] == "cancelled" and lines[-1]["level"] == "error"
    again = api.delete(f"/templates/{template_id}/builds/{build_id}")
    check("DELETE", BUILD, again)
    assert again.status_code == 409
