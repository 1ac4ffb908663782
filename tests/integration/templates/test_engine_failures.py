"""Builds that fail, are cancelled, run at once or fill the disk: each ends cleanly (no
manifest, no temp layer, no build sandbox left) with a message that says why."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_fixtures import (
    Log,
    Uploads,
    backend,
    backend_factory,
    data_dir,
    data_dir_leftovers,
    engine,
    no_templates,
    shared_base,
    store,
    template,
    unique,
    uploads,
)

from bac_server.backends.base import TemplateImage
from bac_server.backends.namespaces import NamespaceBackend
from bac_server.host import remove_tree
from bac_server.templates import (
    BuildEngine,
    BuildRecipe,
    DiskFullError,
    FromTemplate,
    LogEntry,
    LogLevel,
    RunStep,
    StepFailed,
    TemplateBuildError,
    TemplateStore,
    UserStep,
)

pytestmark = [pytest.mark.root, pytest.mark.slow]
# Fixtures, visible to pytest through this module.
__all__ = ["backend", "backend_factory", "data_dir", "engine", "store", "template", "uploads"]


def state(store: TemplateStore) -> tuple[set[str], set[str], list[str]]:
    """(published layers, manifests, temp dirs) of the store."""
    layers = store.data_dir / "layers"
    manifests = store.data_dir / "templates" / "manifests"
    published = {p.name for p in layers.iterdir() if not p.name.startswith(".")} \
        if layers.is_dir() else set()
    written = {p.name for p in manifests.iterdir()} if manifests.is_dir() else set()
    temps = [p.name for p in (layers / ".tmp").iterdir()] if (layers / ".tmp").is_dir() else []
    return published, written, temps


def base_recipe(*commands: str, **options: object) -> BuildRecipe:
    return BuildRecipe(source=FromTemplate("base"),  # type: ignore[arg-type]
                       steps=tuple(RunStep(c) for c in commands), **options)


async def test_failing_run_shows_output_and_exit_code(
        engine: BuildEngine, store: TemplateStore, uploads: Uploads) -> None:
    """A RUN exiting 7 fails the build with one line naming what ran and the exit code; its
    output is in the log once, under its step, the error last; the layers before it stay
    cached, nothing else is left."""
    layers_before, manifests_before, _ = state(store)
    log = Log()
    with pytest.raises(StepFailed) as failure:
        await engine.build(base_recipe(f"echo fine {unique()}",
                                       "echo first line; echo 'it broke' >&2; exit 7"),
                           files=uploads, resolve_template=no_templates, log=log)
    assert str(failure.value) == "RUN failed with exit code 7"
    lines = log.at("2")
    assert lines.count("first line") == 1 and lines.count("it broke") == 1
    assert lines[-1] == "RUN failed with exit code 7"
    assert [e.level for e in log.entries if e.step == "2"][-1] is LogLevel.ERROR
    layers, manifests, temps = state(store)
    assert len(layers - layers_before) == 1 and manifests == manifests_before and temps == []


async def test_copy_of_a_missing_file_names_it(engine: BuildEngine, store: TemplateStore,
                                               uploads: Uploads) -> None:
    """A COPY whose source is not in the uploaded context fails naming the file."""
    uploads.write("present.txt", "here\n")
    step = uploads.copy("present.txt", "/srv/")
    missing = type(step)(src="absent.txt", dest="/srv/", files_hash=step.files_hash)
    with pytest.raises(TemplateBuildError, match=r"absent\.txt"):
        await engine.build(BuildRecipe(source=FromTemplate("base"), steps=(missing,)),
                           files=uploads, resolve_template=no_templates, log=Log())
    assert state(store)[2] == []


async def test_bad_input_is_refused_before_anything_runs(
        engine: BuildEngine, uploads: Uploads) -> None:
    """An invalid user name or an empty command is refused, naming the step."""
    with pytest.raises(TemplateBuildError, match=r"step 2 \(USER a b\): invalid user"):
        await engine.build(BuildRecipe(source=FromTemplate("base"),
                                       steps=(RunStep("true"), UserStep("a b"))),
                           files=uploads, resolve_template=no_templates, log=Log())
    with pytest.raises(TemplateBuildError, match=r"step 1.*command is empty"):
        await engine.build(base_recipe("  "), files=uploads, resolve_template=no_templates,
                           log=Log())


async def test_image_without_python_fails_in_finalize(
        engine: BuildEngine, store: TemplateStore, uploads: Uploads) -> None:
    """A template whose python3 is gone fails with what sandboxes need, and no manifest."""
    manifests_before = state(store)[1]
    recipe = BuildRecipe(source=FromTemplate("base"), steps=(
        RunStep(f"rm -f /usr/bin/python3 /usr/bin/python3.11 # {unique()}", user="root"),))
    with pytest.raises(StepFailed, match=r"no python3: sandboxes need python3 >= 3\.9"):
        await engine.build(recipe, files=uploads, resolve_template=no_templates, log=Log())
    assert state(store)[1] == manifests_before


async def test_cancelled_build_leaves_nothing(
        engine: BuildEngine, store: TemplateStore, backend: NamespaceBackend,
        uploads: Uploads) -> None:
    """Cancelling a build while a RUN runs kills the command and leaves no layer, temp
    directory, manifest, build sandbox or process."""
    before = state(store)
    # Sandboxes of earlier tests may still be going away: only what this build makes counts.
    host_before = set(data_dir_leftovers(backend))
    marker = f"sleep {random.randint(1000, 9999)}.{random.randint(10, 99)}"
    started = asyncio.Event()
    log = Log()

    def watch(entry: LogEntry) -> None:
        log(entry)
        if entry.message == "started":
            started.set()

    task = asyncio.create_task(engine.build(base_recipe(f"echo started; exec {marker}"),
                                            files=uploads, resolve_template=no_templates,
                                            log=watch))
    async with asyncio.timeout(60):
        await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert state(store) == before
    assert set(data_dir_leftovers(backend)) - host_before == set()
    pgrep = await asyncio.create_subprocess_exec("pgrep", "-f", marker,
                                                 stdout=asyncio.subprocess.PIPE)
    assert (await pgrep.communicate())[0] == b"", "the step's command survived the cancel"


async def test_concurrent_builds_share_layers(
        engine: BuildEngine, store: TemplateStore, data_dir: Path, uploads: Uploads,
        tmp_path: Path) -> None:
    """Two builds of one recipe at once, in this process and in another server process,
    all succeed with one digest, and each layer is made exactly once."""
    token = unique()
    commands = [f"echo started {token}; sleep 2", f"echo second {token}"]
    first_running = asyncio.Event()
    logs = [Log(), Log()]

    def watch(entry: LogEntry) -> None:
        logs[0](entry)
        if entry.message.startswith("started"):
            first_running.set()

    first = asyncio.create_task(engine.build(base_recipe(*commands), files=uploads,
                                             resolve_template=no_templates, log=watch))
    async with asyncio.timeout(60):
        await first_running.wait()
    second = asyncio.create_task(engine.build(base_recipe(*commands), files=uploads,
                                              resolve_template=no_templates, log=logs[1]))
    # The child's sandboxes live in a data dir sandbox root can traverse (pytest's tmp_path
    # is 0700 root): it may have to run a step itself when it gets there first.
    child_dir = data_dir.parent / f"{data_dir.name}-child-{token}"
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(Path(__file__).parent / "engine_build_child.py"), str(data_dir),
        str(child_dir), *commands, stdout=asyncio.subprocess.PIPE)
    out, _ = await child.communicate()
    remove_tree(child_dir)
    assert child.returncode == 0
    lines = [json.loads(line) for line in out.decode().splitlines()]
    child_log = Log()
    child_log.entries += [LogEntry(0.0, LogLevel.INFO, line["message"], line["step"])
                          for line in lines[:-1]]
    digests = {(await first).digest, (await second).digest, lines[-1]["digest"]}
    assert len(digests) == 1
    for step in ("1", "2", "finalize"):
        made = [log.made(step) for log in (*logs, child_log)]
        assert made.count(True) == 1, (step, made)
    assert state(store)[2] == []


@pytest.fixture
def small_disk(tmp_path: Path, template: TemplateImage) -> Iterator[TemplateStore]:
    """A template store on a 32 MiB tmpfs (its base rootfs stays on the real disk)."""
    mountpoint = tmp_path / "small"
    mountpoint.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m,mode=0700", "bac-test-small",
                    str(mountpoint)], check=True)
    try:
        shared_base(mountpoint, template)
        yield TemplateStore(mountpoint)
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=True)


async def test_full_disk_fails_cleanly(small_disk: TemplateStore, backend: NamespaceBackend,
                                       uploads: Uploads) -> None:
    """A step that fills the disk fails as DiskFullError naming the disk; no temp layer."""
    engine = BuildEngine(small_disk, backend)
    with pytest.raises(DiskFullError, match="no space left on the device"):
        await engine.build(base_recipe(f"head -c 64M /dev/zero > /big # {unique()}"),
                           files=uploads, resolve_template=no_templates, log=Log())
    assert state(small_disk)[2] == [] and state(small_disk)[1] == set()
