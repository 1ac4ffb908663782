"""The official e2b SDK's Template builder (2.63.0) against Bac: builds, the upload cache,
tags, exists, failures, and sandboxes created from what it built."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest
from bac_process import ServerProcess
from e2b import AsyncTemplate, LogEntry, Sandbox, Template, wait_for_port
from e2b.exceptions import BuildException, SandboxException

pytestmark = pytest.mark.root
DEADLINE = 30.0


def _name(label: str) -> str:
    return f"compat-{label}-{uuid.uuid4().hex[:8]}"


def _context(tmp_path: Path) -> Path:
    context = tmp_path / "context"
    context.mkdir()
    (context / "main.py").write_text("print('hello from the template')\n")
    (context / "data.txt").write_text("v1\n")
    return context


def _messages(logs: list[LogEntry]) -> list[str]:
    return [entry.message for entry in logs]


def test_builder_steps_reach_a_sandbox_created_from_the_template(tmp_path: Path) -> None:
    """COPY (owner, mode), RUN as root, ENV, WORKDIR, USER, the start and ready commands
    and the requested resources are all there in a sandbox created by name."""
    name = _name("app")
    template = (
        Template(file_context_path=_context(tmp_path))
        .from_template("base")
        .set_user("root")
        .run_cmd("mkdir -p /srv/app && chown user:user /srv/app")
        .copy("main.py", "/srv/app/main.py", user="user", mode=0o750)
        .set_envs({"APP_MODE": "compat", "APP_PORT": "8123"})
        .set_workdir("/srv/app")
        .set_user("user")
        .set_start_cmd("python3 -m http.server 8123", wait_for_port(8123))
    )
    logs: list[LogEntry] = []
    info = Template.build(template, name, cpu_count=1, memory_mb=768,
                          on_build_logs=logs.append)
    assert (info.name, info.tags) == (name, ["default"])
    assert any("Uploaded 'main.py'" in m for m in _messages(logs))
    sbx = Sandbox.create(name)
    try:
        run = sbx.commands.run("python3 main.py; echo $APP_MODE; whoami; pwd; "
                               "stat -c '%U %a' main.py")
        assert run.stdout.splitlines() == ["hello from the template", "compat", "user",
                                           "/srv/app", "user 750"]
        served = sbx.commands.run("curl -s -o /dev/null -w '%{http_code}' "
                                  "http://127.0.0.1:8123/main.py")
        assert served.stdout == "200"
        detail = sbx.get_info()
        assert detail.template_id == info.template_id
        assert (detail.cpu_count, detail.memory_mb) == (1, 768)
    finally:
        sbx.kill()


def test_unchanged_rebuild_skips_the_upload_and_every_layer(tmp_path: Path) -> None:
    """The second build of the same template re-uploads nothing and takes every layer from
    the cache; changing a copied file rebuilds from that step on only."""
    name = _name("cache")
    context = _context(tmp_path)
    # Layers are shared by every build on the machine: unique contents, so that this test's
    # first build makes its layers and the change below is new to the cache.
    run_id = uuid.uuid4().hex
    (context / "data.txt").write_text(f"v1 {run_id}\n")

    def template() -> Template:
        return (Template(file_context_path=context).from_base_image()
                .run_cmd(f"echo first-{run_id} > /tmp/first")
                .copy("data.txt", "/home/user/data.txt")
                .run_cmd("cat /home/user/data.txt > /tmp/copied"))

    Template.build(template(), name)
    logs: list[LogEntry] = []
    started = time.monotonic()
    Template.build(template(), name, on_build_logs=logs.append)
    elapsed = time.monotonic() - started
    messages = _messages(logs)
    assert "Skipping upload of 'data.txt', already cached" in messages
    assert not any(m.startswith("Uploaded") for m in messages)
    assert sum("CACHED" in m for m in messages) == 4, messages  # 3 steps and finalize
    assert elapsed < 5.0, f"cached rebuild took {elapsed:.2f}s"

    (context / "data.txt").write_text(f"v2 {run_id}\n")
    logs.clear()
    Template.build(template(), name, on_build_logs=logs.append)
    messages = _messages(logs)
    assert any(m.startswith("Uploaded 'data.txt'") for m in messages)
    assert any("Step 1/3" in m and "CACHED" in m for m in messages)
    assert not any("Step 2/3" in m and "CACHED" in m for m in messages)
    sbx = Sandbox.create(name)
    try:
        assert sbx.commands.run("cat /tmp/first /tmp/copied").stdout == \
            f"first-{run_id}\nv2 {run_id}\n"
    finally:
        sbx.kill()


def test_exists_tags_and_names_with_tags(server: ServerProcess) -> None:
    """exists is true only for the building team; name:tag builds and sandboxes; tags can be
    assigned, listed and removed."""
    name = _name("tags")
    other = {"api_key": server.keys[1]}
    assert Template.exists(name) is False
    info = Template.build(Template().from_template("base").run_cmd("echo v1 > /tmp/v"),
                          f"{name}:v1")
    assert info.tags == ["v1"]
    assert Template.exists(name) is True
    assert Template.exists(name, **other) is False
    assigned = Template.assign_tags(f"{name}:v1", ["prod", "stable"])
    assert sorted(assigned.tags) == ["prod", "stable"] and assigned.build_id == info.build_id
    tags = {t.tag: t.build_id for t in Template.get_tags(name)}
    assert tags == {"v1": info.build_id, "prod": info.build_id, "stable": info.build_id}
    Template.remove_tags(name, "stable")
    assert {t.tag for t in Template.get_tags(name)} == {"v1", "prod"}
    sbx = Sandbox.create(f"{name}:prod")
    try:
        assert sbx.commands.run("cat /tmp/v").stdout == "v1\n"
    finally:
        sbx.kill()
    # No build took the default tag, so the bare name does not resolve.
    with pytest.raises(SandboxException, match="not found"):
        Sandbox.create(name)


def test_failed_build_names_the_step_and_keeps_the_previous_build(tmp_path: Path) -> None:
    """A failing RUN raises BuildException with its exit code; its step's log line and
    output come once before it; the template keeps serving its previous ready build."""
    name = _name("fail")
    Template.build(Template().from_template("base").run_cmd("echo good > /tmp/state"), name)
    broken = (Template().from_template("base")
              .run_cmd("echo bad > /tmp/state")
              .run_cmd("echo out-marker-42; exit 3"))
    logs: list[LogEntry] = []
    with pytest.raises(BuildException) as failure:
        Template.build(broken, name, on_build_logs=logs.append)
    assert str(failure.value) == "RUN failed with exit code 3"
    messages = _messages(logs)
    assert "Step 2/2: RUN echo out-marker-42; exit 3" in messages
    assert messages.count("out-marker-42") == 1 and messages.count(str(failure.value)) == 1
    sbx = Sandbox.create(name)
    try:
        assert sbx.commands.run("cat /tmp/state").stdout == "good\n"
    finally:
        sbx.kill()


def test_another_teams_template_is_not_found(server: ServerProcess) -> None:
    """Creating a sandbox from another team's private template fails as if it did not exist,
    by name and by id."""
    name = _name("private")
    info = Template.build(Template().from_template("base").run_cmd("true"), name)
    for ref in (name, info.template_id):
        with pytest.raises(SandboxException, match="not found"):
            Sandbox.create(ref, api_key=server.keys[1])


async def test_async_builder_builds_in_background_and_polls() -> None:
    """AsyncTemplate.build_in_background returns at once; get_build_status reaches ready."""
    name = _name("async")
    info = await AsyncTemplate.build_in_background(
        AsyncTemplate().from_template("base").run_cmd("echo async > /tmp/a"), name)
    end = time.monotonic() + DEADLINE * 4
    status = await AsyncTemplate.get_build_status(info)
    # Nothing announces the end of a build to a polling client: poll with a deadline.
    while status.status.value in ("waiting", "building") and time.monotonic() < end:
        await asyncio.sleep(0.2)
        status = await AsyncTemplate.get_build_status(info)
    assert status.status.value == "ready", status
    assert await AsyncTemplate.exists(name)
