"""Real template builds through the namespace backend's build sandboxes: a full recipe
seen from a sandbox, the layer cache on rebuilds, and what a changed COPY rebuilds."""

from __future__ import annotations

import time

import pytest
from engine_fixtures import (
    Log,
    SandboxFactory,
    Uploads,
    backend,
    backend_factory,
    data_dir,
    engine,
    log,
    make_sandbox,
    no_templates,
    store,
    template,
    unique,
    uploads,
)

from bac_server.backends.base import TemplateImage
from bac_server.templates import (
    BuildEngine,
    BuildRecipe,
    EnvStep,
    FromImage,
    FromTemplate,
    RunStep,
    TemplateStore,
    UserStep,
    WorkdirStep,
)

pytestmark = [pytest.mark.root, pytest.mark.slow]
# Fixtures, visible to pytest through this module.
__all__ = ["backend", "backend_factory", "data_dir", "engine", "log", "make_sandbox", "store",
           "template", "uploads"]

APT = ("apt-get update -q && apt-get install -y -q --no-install-recommends tree "
       "&& rm -rf /var/lib/apt/lists/*")


def full_recipe(uploads: Uploads, config_text: str) -> BuildRecipe:
    uploads.write("config.txt", config_text)
    uploads.write("assets/a.txt", "asset a\n")
    uploads.write("assets/sub/b.txt", "asset b\n")
    return BuildRecipe(
        source=FromTemplate("base"),
        steps=(
            RunStep(APT, user="root"),
            RunStep("pip install -q --no-cache-dir six==1.16.0", user="root"),
            EnvStep((("GREETING", "hello"), ("APP", "/srv/app"))),
            WorkdirStep("/srv/app"),
            uploads.copy("assets", "assets/"),
            uploads.copy("config.txt", "/srv/app/", user="user", mode=0o600),
            UserStep("worker"),
            RunStep('echo "$GREETING from $(whoami) in $(pwd)" > "$HOME/note.txt"'),
        ),
        start_cmd="python3 -m http.server 8123 --directory /srv/app/assets",
        ready_cmd="curl -sf -o /dev/null http://127.0.0.1:8123/a.txt",
    )


async def test_full_recipe_is_what_a_sandbox_sees(
        engine: BuildEngine, store: TemplateStore, uploads: Uploads, log: Log,
        make_sandbox: SandboxFactory) -> None:
    """RUN (apt, pip), ENV, WORKDIR, COPY (dir, file with owner and mode), USER, start and
    ready commands all show in a sandbox of the built template; the server is up."""
    recipe = full_recipe(uploads, "setting=1\n")
    built = await engine.build(recipe, files=uploads, resolve_template=no_templates, log=log)
    assert built.config.user == "worker" and built.config.workdir == "/srv/app"
    assert dict(built.config.env) == {"GREETING": "hello", "APP": "/srv/app"}
    image = await store.built(built.digest, "full")
    box = await make_sandbox(template=image)
    checks = {
        "tree --version | head -c 9": "tree v2.1",
        "python3 -c 'import six; print(six.__version__)'": "1.16.0",
        "cat assets/a.txt assets/sub/b.txt": "asset a\nasset b",
        "stat -c '%U %a' config.txt": "user 600",
        "sudo cat config.txt": "setting=1",
        "whoami; pwd; echo $GREETING": "worker\n/srv/app\nhello",
        "cat ~/note.txt": "hello from worker in /srv/app",
        "curl -s http://127.0.0.1:8123/sub/b.txt": "asset b",
        "pgrep -u worker -f 'http.server 8123' >/dev/null && echo running": "running",
    }
    for command, expected in checks.items():
        result = await box.run(command, user="worker")
        assert (result.exit_code, result.stdout.strip()) == (0, expected), (command, result)
    assert not log.cached("1") and log.made("1")


async def test_unchanged_rebuild_hits_every_layer(
        engine: BuildEngine, uploads: Uploads) -> None:
    """A second build of an unchanged recipe takes every layer from the cache in ≤ 2 s."""
    recipe = full_recipe(uploads, "setting=1\n")
    first = await engine.build(recipe, files=uploads, resolve_template=no_templates,
                               log=Log())
    log = Log()
    started = time.monotonic()
    again = await engine.build(recipe, files=uploads, resolve_template=no_templates, log=log)
    elapsed = time.monotonic() - started
    assert again.digest == first.digest
    layer_steps = ["1", "2", "5", "6", "7", "8", "finalize"]
    assert [s for s in layer_steps if not log.cached(s)] == []
    assert [s for s in layer_steps if log.made(s)] == []
    assert elapsed <= 2.0, f"cached rebuild took {elapsed:.2f}s"


async def test_changed_copy_rebuilds_from_that_step_only(
        engine: BuildEngine, store: TemplateStore, uploads: Uploads,
        make_sandbox: SandboxFactory) -> None:
    """Changing one COPY'd file keeps every earlier layer and rebuilds it and what follows."""
    await engine.build(full_recipe(uploads, "setting=1\n"), files=uploads,
                       resolve_template=no_templates, log=Log())
    log = Log()
    built = await engine.build(full_recipe(uploads, "setting=2\n"), files=uploads,
                               resolve_template=no_templates, log=log)
    assert all(log.cached(s) for s in ("1", "2", "5"))
    assert all(log.made(s) for s in ("6", "7", "8", "finalize"))
    box = await make_sandbox(template=await store.built(built.digest, "changed"))
    result = await box.run("sudo cat /srv/app/config.txt", user="worker")
    assert result.stdout.strip() == "setting=2"


async def test_e2b_base_image_is_the_base_template(engine: BuildEngine, uploads: Uploads
                                                    ) -> None:
    """FROM e2bdev/base (what E2B's from_base_image sends) reuses FROM base's layers."""
    recipe = BuildRecipe(source=FromTemplate("base"), steps=(RunStep(f"echo {unique()}"),))
    first = await engine.build(recipe, files=uploads, resolve_template=no_templates, log=Log())
    log = Log()
    again = await engine.build(BuildRecipe(source=FromImage("e2bdev/base:latest"),
                                           steps=recipe.steps),
                               files=uploads, resolve_template=no_templates, log=log)
    assert again.digest == first.digest and log.cached("1")


async def test_force_rebuilds_from_the_forced_step(engine: BuildEngine, uploads: Uploads
                                                    ) -> None:
    """``force`` on a step rebuilds it and every later step, not the earlier ones."""
    token = unique()
    steps = (RunStep(f"echo one {token}"), RunStep(f"echo two {token}"),
             RunStep(f"echo three {token}"))
    await engine.build(BuildRecipe(source=FromTemplate("base"), steps=steps), files=uploads,
                       resolve_template=no_templates, log=Log())
    forced = (steps[0], RunStep(steps[1].command, force=True), steps[2])
    log = Log()
    await engine.build(BuildRecipe(source=FromTemplate("base"), steps=forced), files=uploads,
                       resolve_template=no_templates, log=log)
    assert log.cached("1") and log.made("2") and log.made("3") and log.made("finalize")


def test_layers_are_stored_once(store: TemplateStore) -> None:
    """Every layer directory holds a layer.json and a diff, and nothing else is left."""
    root = store.data_dir / "layers"
    published = [p for p in root.iterdir() if not p.name.startswith(".")]
    assert published
    for layer in published:
        assert sorted(x.name for x in layer.iterdir()) == ["diff", "layer.json"]
    assert list((root / ".tmp").iterdir()) == []
    stubs = [*root.glob("*/diff/.bac-copy"), *root.glob("*/diff/.bac-host-ca")]
    assert stubs == [], "a build step's mount point stayed in its layer"


async def test_from_a_built_template(engine: BuildEngine, store: TemplateStore,
                                     uploads: Uploads, make_sandbox: SandboxFactory) -> None:
    """A recipe FROM a template built here starts on its layers, user and env."""
    token = unique()
    parent = await engine.build(
        BuildRecipe(source=FromTemplate("base"), steps=(
            EnvStep((("FROM_PARENT", token),)), RunStep("echo parent > ~/parent.txt"))),
        files=uploads, resolve_template=no_templates, log=Log())

    async def resolve(ref: str) -> TemplateImage:
        assert ref == "team/parent:v1"
        return await store.built(parent.digest, ref)

    child = await engine.build(
        BuildRecipe(source=FromTemplate("team/parent:v1"), steps=(
            RunStep('echo "child of $FROM_PARENT" > ~/child.txt'),)),
        files=uploads, resolve_template=resolve, log=Log())
    assert child.layers[:len(parent.layers) - 1] == parent.layers[:-1]
    box = await make_sandbox(template=await store.built(child.digest, "child"))
    result = await box.run("cat ~/parent.txt ~/child.txt; whoami", user="user")
    assert result.stdout.split("\n")[:3] == ["parent", f"child of {token}", "user"]
