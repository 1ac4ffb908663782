"""Deep layer chains are squashed: the oldest layers and the rootfs become one rootfs, and
a sandbox sees exactly what it would have seen on the full stack."""

from __future__ import annotations

import pytest
from engine_fixtures import (
    Log,
    SandboxFactory,
    Uploads,
    backend,
    backend_factory,
    data_dir,
    make_sandbox,
    no_templates,
    store,
    template,
    unique,
    uploads,
)

from bac_server.backends.namespaces import NamespaceBackend
from bac_server.templates import BuildEngine, BuildRecipe, FromTemplate, RunStep, TemplateStore

pytestmark = [pytest.mark.root, pytest.mark.slow]
# Fixtures, visible to pytest through this module.
__all__ = ["backend", "backend_factory", "data_dir", "make_sandbox", "store", "template",
           "uploads"]


async def test_deep_chain_is_squashed(store: TemplateStore, backend: NamespaceBackend,
                                      uploads: Uploads, make_sandbox: SandboxFactory) -> None:
    """Past max_depth the base and oldest layers merge (deletions included); the result
    is cached for rebuilds and its sandboxes see every step's files."""
    engine = BuildEngine(store, backend, max_depth=3, keep=1)
    token = unique()
    steps = [RunStep(f"rm /usr/bin/nano; echo 1 > /layer-1 # {token}", user="root")]
    steps += [RunStep(f"echo {n} > /layer-{n}", user="root") for n in range(2, 6)]
    recipe = BuildRecipe(source=FromTemplate("base"), steps=tuple(steps))
    log = Log()
    built = await engine.build(recipe, files=uploads, resolve_template=no_templates, log=log)
    assert any(m.startswith("squashing the base and 3 layers") for m in log.at("5"))
    assert built.rootfs.parent.parent == store.data_dir / "layers"
    assert len(built.layers) <= 3
    box = await make_sandbox(template=await store.built(built.digest, "deep"))
    result = await box.run("cat /layer-1 /layer-2 /layer-3 /layer-4 /layer-5; "
                           "test -e /usr/bin/nano || echo gone; stat -c %U /usr/bin/sudo")
    assert result.stdout.split() == ["1", "2", "3", "4", "5", "gone", "root"]
    assert (await box.run("sudo -n true && echo sudo works")).stdout.strip() == "sudo works"
    again = Log()
    rebuilt = await engine.build(recipe, files=uploads, resolve_template=no_templates,
                                 log=again)
    assert rebuilt.digest == built.digest
    assert not any(m.startswith("done in") for e in ("1", "5", "finalize")
                   for m in again.at(e))
