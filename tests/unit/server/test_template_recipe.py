"""Build bodies as the official SDK serialises them become the right recipe; what is stored
of a recipe and its log never holds the registry password; the log is bounded."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from e2b import Template

from bac_server.api.templates import TemplateBuildStart, to_recipe
from bac_server.control.builds import MAX_LINES, BuildLog, recipe_record
from bac_server.store import BuildLogRecord
from bac_server.store.sealing import Sealer
from bac_server.store.sql import SqlStore
from bac_server.templates import (
    CopyStep,
    EnvStep,
    FromImage,
    FromTemplate,
    LogEntry,
    LogLevel,
    RunStep,
    UserStep,
    WorkdirStep,
)

SEALER = Sealer(Sealer.new_key())  # one key for every store a test reopens


def _wire(template: object) -> TemplateBuildStart:
    """The body ``Template.build`` sends, without talking to a server."""
    inner = template._template  # type: ignore[attr-defined]
    return TemplateBuildStart.model_validate(inner._serialize(inner._instructions_with_hashes()))


def test_sdk_steps_become_the_recipe(tmp_path: Path) -> None:
    """RUN (with a user), COPY (owner, octal mode, files hash), ENV pairs, WORKDIR, USER,
    start and ready commands and skip_cache arrive as the SDK meant them."""
    (tmp_path / "app.py").write_text("print(1)\n")
    template = (Template(file_context_path=tmp_path).from_template("my-base:v2")
                .run_cmd(["apt-get update", "apt-get install -y jq"], user="root")
                .copy("app.py", "/app/", user="user", mode=0o755)
                .set_envs({"A": "1", "B": "two words"})
                .set_workdir("/app")
                .skip_cache()
                .set_user("user")
                .set_start_cmd("python3 app.py", "true"))
    recipe = to_recipe(_wire(template))
    assert recipe.source == FromTemplate("my-base:v2")
    run, copy, env, workdir, user = recipe.steps
    assert run == RunStep("apt-get update && apt-get install -y jq", user="root")
    assert isinstance(copy, CopyStep) and (copy.src, copy.dest, copy.user, copy.mode) == (
        "app.py", "/app/", "user", 0o755)
    assert len(copy.files_hash) == 64
    assert env == EnvStep((("A", "1"), ("B", "two words")))
    assert workdir == WorkdirStep("/app")
    assert user == UserStep("user", force=True)
    assert (recipe.start_cmd, recipe.ready_cmd) == ("python3 app.py", "true")


def test_registry_password_is_never_stored() -> None:
    """from_image with credentials keeps them for the pull only: the stored recipe has the
    user name, not the password."""
    recipe = to_recipe(_wire(Template().from_image("registry.local/app:1", username="bob",
                                                   password="s3cret-pw").run_cmd("true")))
    assert recipe.source == FromImage("registry.local/app:1", "bob", "s3cret-pw")
    stored = recipe_record(recipe)
    assert stored["fromImage"] == "registry.local/app:1" and stored["registryUser"] == "bob"
    assert "s3cret-pw" not in repr(stored)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    opened = await SqlStore.open(f"sqlite+aiosqlite:///{tmp_path / 'bac.db'}", SEALER)
    try:
        yield opened
    finally:
        await opened.close()


def _held_writes(store: SqlStore) -> tuple[asyncio.Event, asyncio.Event]:
    """Make the store's log writes wait: the first event is set when a write starts, the
    second lets every write through."""
    writing, release = asyncio.Event(), asyncio.Event()
    real_add = store.builds.add_build_logs

    async def slow_add(batch: list[BuildLogRecord]) -> None:
        writing.set()
        await release.wait()
        await real_add(batch)

    store.builds.add_build_logs = slow_add  # type: ignore[method-assign]
    return writing, release


async def test_log_is_bounded_redacted_and_thread_safe(store: SqlStore) -> None:
    """Lines from the loop and from a thread are numbered in order; the password never
    reaches the store; past the bound, lines are counted and one final line says so."""
    writes = 0

    def wrote() -> None:
        nonlocal writes
        writes += 1

    log = BuildLog(store.builds, "b1", on_write=wrote, secrets=["s3cret-pw"])
    log.line(LogLevel.INFO, "pulling with s3cret-pw", "base")

    def from_thread() -> None:
        log.add(LogEntry(datetime.now(UTC).timestamp(), LogLevel.WARN, "from a thread", "1"))

    worker = threading.Thread(target=from_thread)
    worker.start()
    worker.join()
    await log.flush()
    for n in range(MAX_LINES + 5):  # with the 2 above: 9999 kept, 8 dropped, 1 notice
        log.line(LogLevel.INFO, f"line {n}", "2")
    await log.close()
    stored = await store.builds.build_logs("b1", limit=MAX_LINES + 100)
    assert len(stored) == MAX_LINES and [e.seq for e in stored] == list(range(MAX_LINES))
    assert stored[0].message == "pulling with ***"
    assert (stored[1].message, stored[1].level, stored[1].step) == ("from a thread", "warn",
                                                                    "1")
    assert stored[-1].message == f"8 more log lines were not kept (at most {MAX_LINES} per build)"
    assert log.last_step == "2" and writes >= 2


async def test_a_line_added_during_a_write_is_written_without_another_line(
        store: SqlStore) -> None:
    """A line that arrives while the delayed flush is writing the previous batch (a step
    that prints once and then runs quietly) still reaches the store and its followers."""
    writing, release = _held_writes(store)
    written = asyncio.Event()
    log = BuildLog(store.builds, "b2", on_write=written.set)
    log.line(LogLevel.INFO, "first", "1")
    await asyncio.wait_for(writing.wait(), 10)
    log.line(LogLevel.INFO, "running-42", "2")  # the delayed flush is mid-write
    release.set()
    for _ in range(2):  # the first batch's write, then the second's
        await asyncio.wait_for(written.wait(), 10)
        written.clear()
    stored = await store.builds.build_logs("b2", limit=10)
    assert [e.message for e in stored] == ["first", "running-42"]


async def test_closing_during_the_delayed_write_keeps_its_lines(store: SqlStore) -> None:
    """A build that fails while the delayed flush is writing its last output (a RUN that
    prints and exits at once) keeps those lines: closing waits for the write instead of
    cancelling it, so the failed build's reason has the step's output."""
    writing, release = _held_writes(store)
    log = BuildLog(store.builds, "b3", on_write=lambda: None)
    log.line(LogLevel.INFO, "going down", "3")
    await asyncio.wait_for(writing.wait(), 10)  # the delayed flush is mid-write
    log.line(LogLevel.ERROR, "step 3 failed", "3")
    closing = asyncio.create_task(log.close())
    release.set()  # the close task was scheduled first: it finds the write in flight
    await asyncio.wait_for(closing, 10)
    stored = await store.builds.build_logs("b3", limit=10)
    assert [e.message for e in stored] == ["going down", "step 3 failed"]
