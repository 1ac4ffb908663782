"""A build FROM an imported image (``debian:bookworm``, from Debian's archive): steps start
as the image's user (root), the template gets E2B's default user, and a sandbox runs it."""

from __future__ import annotations

import pytest
from engine_fixtures import (
    Log,
    SandboxFactory,
    Uploads,
    backend,
    backend_factory,
    data_dir,
    engine,
    make_sandbox,
    no_templates,
    store,
    template,
    unique,
    uploads,
)

from bac_server.templates import (
    BuildEngine,
    BuildRecipe,
    EnvStep,
    FromImage,
    RunStep,
    TemplateStore,
)

pytestmark = [pytest.mark.root, pytest.mark.slow]
# Fixtures, visible to pytest through this module.
__all__ = ["backend", "backend_factory", "data_dir", "engine", "make_sandbox", "store",
           "template", "uploads"]


@pytest.mark.timeout(900)
async def test_from_debian_suite(engine: BuildEngine, store: TemplateStore, uploads: Uploads,
                                 make_sandbox: SandboxFactory) -> None:
    """FROM debian:bookworm: RUN runs as root, the sandbox's default user is a new `user`
    (uid 1000, home /home/user) and sees the image's and the recipe's ENV."""
    token = unique()
    recipe = BuildRecipe(source=FromImage("debian:bookworm"), steps=(
        EnvStep((("MARK", token),)),
        RunStep('echo "$(whoami) $MARK" > /built-by'),
    ))
    log = Log()
    built = await engine.build(recipe, files=uploads, resolve_template=no_templates, log=log)
    assert any("debian:bookworm" in m for m in log.at("base"))
    assert (built.config.user, built.config.workdir) == ("user", "/home/user")
    box = await make_sandbox(template=await store.built(built.digest, "from-debian"))
    result = await box.run("cat /built-by; id -u; pwd; echo $MARK; cat /etc/debian_version",
                           user="user")
    lines = result.stdout.split("\n")
    assert lines[:4] == [f"root {token}", "1000", "/home/user", token], result
    assert lines[4].startswith("12.")
    again = Log()
    await engine.build(recipe, files=uploads, resolve_template=no_templates, log=again)
    assert again.cached("2") and again.cached("finalize")
