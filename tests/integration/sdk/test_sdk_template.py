"""Bac's template API end to end: the Python builder and a Dockerfile built on a real
server, sandboxes from them, the layer cache, logs, tags, cancel and bad input."""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path

import pytest
from sdk_server import BacServer

from bac import (
    AsyncSandbox,
    AsyncTemplates,
    BuildLogEntry,
    BuildStatus,
    DockerfileError,
    Sandbox,
    Template,
    TemplateBuildError,
    Templates,
)

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _name(label: str) -> str:
    return f"sdk-{label}-{uuid.uuid4().hex[:8]}"


def _cached_steps(logs: list[BuildLogEntry]) -> set[str]:
    return {e.step for e in logs if e.step and e.step.isdigit()
            and re.search(r"\bCACHED$", e.message)}


async def test_builder_template_reaches_a_sandbox(bac_server: BacServer, tmp_path: Path
                                                  ) -> None:
    """Each builder step (RUN as root, COPY with owner and mode, ENV, WORKDIR, USER, start
    and ready commands) is there in a sandbox created from the built template."""
    (tmp_path / "hello.py").write_text("print('hello from the builder')\n")
    name = _name("builder")
    template = (Template("base", context=tmp_path)
                .run("mkdir -p /opt/demo && echo built > /opt/demo/marker", user="root")
                .copy("hello.py", "/opt/demo/", user="user", mode=0o640)
                .env({"DEMO": "yes"})
                .workdir("/opt/demo")
                .user("user")
                .start_cmd("python3 -m http.server 8765",
                           ready_cmd="curl -sf http://127.0.0.1:8765/ -o /dev/null"))
    logs: list[BuildLogEntry] = []
    async with AsyncTemplates(**bac_server.opts()) as templates:
        info = await templates.build(template, name, cpu_count=1, memory_mb=512,
                                     on_log=logs.append)
        assert (info.name, info.tags, info.steps) == (name, ["default"], 5)
        assert any(e.step == "finalize" for e in logs)
        assert await templates.exists(name)
        async with await AsyncSandbox.create(name, timeout=60, **bac_server.opts()) as box:
            run = await box.commands.run(
                "cat marker; python3 hello.py; echo $DEMO; whoami; pwd; "
                "stat -c '%U %a' hello.py; curl -s -o /dev/null -w '%{http_code}' "
                "http://127.0.0.1:8765/hello.py")
            assert run.stdout.splitlines() == [
                "built", "hello from the builder", "yes", "user", "/opt/demo", "user 640", "200"]
            detail = await box.get_info()
            assert (detail.cpu_count, detail.memory_mb) == (1, 512)
        assert await templates.delete(name)
        assert not await templates.exists(name)


def test_dockerfile_cache_rebuilds_only_from_a_changed_copy(bac_server: BacServer,
                                                             tmp_path: Path) -> None:
    """An unchanged rebuild takes every layer from the cache; a changed COPY'd file
    rebuilds that step and later ones only."""
    (tmp_path / "a.txt").write_text("a1\n")
    (tmp_path / "b.txt").write_text("b1\n")
    name = _name("cache")
    # Layers are shared by every build on the machine: a fresh first RUN makes this
    # build's chain new.
    (tmp_path / "Dockerfile").write_text(
        f"FROM base\nRUN echo {name} > /one\nCOPY a.txt /data/\nRUN cat /data/a.txt > /two\n"
        "COPY b.txt /data/\nRUN cat /data/b.txt > /three\n")
    with Templates(**bac_server.opts()) as templates:
        first = templates.build(Template.from_dockerfile(tmp_path / "Dockerfile"), name)
        assert first.cached_steps == 0
        logs: list[BuildLogEntry] = []
        again = templates.build(Template.from_dockerfile(tmp_path / "Dockerfile"), name,
                                on_log=logs.append)
        # The five instructions after FROM; the Dockerfile's bookkeeping (USER root first,
        # USER user last, which makes a layer) is no step of the build's.
        assert _cached_steps(logs) == {"1", "2", "3", "4", "5"}
        assert again.cached_steps == again.steps == 5
        print(f"first build {first.duration_s:.2f} s, cached rebuild {again.duration_s:.2f} s")
        assert any("already on the server" in e.message for e in logs)
        (tmp_path / "b.txt").write_text("b2\n")
        logs.clear()
        templates.build(Template.from_dockerfile(tmp_path / "Dockerfile"), name,
                        on_log=logs.append)
        assert _cached_steps(logs) == {"1", "2", "3"}
        assert any(e.step == "4" and e.message.startswith("uploaded 'b.txt'") for e in logs)
        with Sandbox.create(name, timeout=60, **bac_server.opts()) as box:  # killed, closed
            assert box.commands.run("cat /one /two /three").stdout == f"{name}\na1\nb2\n"
        tags = templates.tags(name)
        assert [t.tag for t in tags] == ["default"]
        assert templates.assign_tags(f"{name}:default", ["v1"]) == ["v1"]
        assert sorted(t.tag for t in templates.tags(name)) == ["default", "v1"]
        templates.remove_tags(name, ["v1"])
        assert [t.tag for t in templates.tags(name)] == ["default"]
        build_id = templates.get(name).builds[0].build_id
        replay = list(templates.logs(name, build_id))
        assert replay and replay[-1].step == "finalize"
        assert templates.delete(name)


def test_failed_build_names_step_line_and_output(bac_server: BacServer,
                                                 tmp_path: Path) -> None:
    """A failing RUN raises TemplateBuildError with its step as written (the first after
    FROM), Dockerfile line, output (once) and exit code."""
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM base\nRUN echo going down; exit 7\n")
    with Templates(**bac_server.opts()) as templates, \
            pytest.raises(TemplateBuildError) as caught:
        templates.build(Template.from_dockerfile(dockerfile), _name("fail"))
    error = caught.value
    assert (error.step, error.origin and error.origin.line) == ("1", 2)
    assert error.instruction == "RUN echo going down; exit 7"
    assert [e.message for e in error.logs] == ["going down"]
    assert error.reason == "RUN failed with exit code 7"


def test_missing_copy_source_fails_before_the_server(bac_server: BacServer,
                                                      tmp_path: Path) -> None:
    """A COPY source missing from the context is a DockerfileError naming it and its
    line, and no template is created."""
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM base\nRUN true\nCOPY missing.txt /x\n")
    name = _name("missing")
    with Templates(**bac_server.opts()) as templates:
        with pytest.raises(DockerfileError) as caught:
            templates.build(Template.from_dockerfile(dockerfile), name)
        assert caught.value.line == 3 and "'missing.txt' not found" in str(caught.value)
        assert not templates.exists(name)


async def test_cancelled_build_is_stopped_on_the_server(bac_server: BacServer) -> None:
    """Cancelling the task waiting for a build cancels the build itself: it ends in error,
    "cancelled"."""
    name = _name("cancel")
    running = asyncio.Event()
    seen: list[BuildLogEntry] = []

    def on_log(entry: BuildLogEntry) -> None:
        seen.append(entry)
        if entry.step == "1" and "sleep" in entry.message:
            running.set()

    async with AsyncTemplates(**bac_server.opts()) as templates:
        task = asyncio.create_task(
            # A command of its own: a layer key no other build on the machine holds.
            templates.build(Template().run(f"sleep 120 # {name}"), name, on_log=on_log))
        waiting = asyncio.create_task(running.wait())
        await asyncio.wait({task, waiting}, timeout=120, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        assert running.is_set(), (task.done() and task.exception(), [e.message for e in seen])
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        build_id = (await templates.get(name)).builds[0].build_id
        state = await templates.build_status(name, build_id)
        assert state.status is BuildStatus.ERROR
        assert state.reason is not None and "cancel" in state.reason
        assert not await templates.cancel(name, build_id)  # already over
