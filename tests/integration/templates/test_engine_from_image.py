"""A build FROM an imported image (``debian:bookworm``, from Debian's archive, and the same
rootfs pushed as an OCI image to a loopback registry): steps start as the image's user
(root), the template gets E2B's default user, and a sandbox runs it.

Debian is imported once per session data dir (the ``debian`` fixture); the registry test
packs that rootfs rather than running mmdebstrap again."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
import pytest_asyncio
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
from registry_fixture import Entry, build_image, running_registry, write_layer, write_tree_layer

from bac_server.backends.namespaces import NamespaceBackend
from bac_server.host import remove_tree
from bac_server.templates import (
    BuildEngine,
    BuildRecipe,
    EnvStep,
    FromImage,
    ImportedImage,
    RegistryAccess,
    RunStep,
    TemplateStore,
    materialize_image,
)

pytestmark = [pytest.mark.root, pytest.mark.slow]
# Fixtures, visible to pytest through this module.
__all__ = ["backend", "backend_factory", "data_dir", "engine", "make_sandbox", "store",
           "template", "uploads"]
DEBIAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def debian(store: TemplateStore) -> ImportedImage:
    """debian:bookworm imported (mmdebstrap) once into the session's data dir."""
    return await materialize_image(FromImage("debian:bookworm"), data_dir=store.data_dir,
                                   id_range=store.id_range, progress=lambda _line: None)


@pytest.mark.timeout(900)
async def test_from_debian_suite(debian: ImportedImage, engine: BuildEngine,
                                 store: TemplateStore, uploads: Uploads,
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


def pack_as_oci(debian: ImportedImage, work: Path, id_base: int) -> Path:
    """The Debian rootfs as an OCI layout ``test``: its ids back to container ids, a layer
    adding /srv/app, and a config with its own Env and WorkingDir."""
    work.mkdir(mode=0o700)
    rootfs = write_tree_layer(work / "rootfs.tar", debian.rootfs, id_base)
    app = write_layer(work / "app.tar", [Entry("srv/app", tarfile.DIRTYPE, mode=0o755)])
    layout = build_image(work / "layout", "test", [rootfs, app], config=(
        f"--config.env=PATH={DEBIAN_PATH}", "--config.env=FROM_REGISTRY=yes",
        "--config.workingdir=/srv/app"))
    rootfs.unlink()  # umoci keeps its own compressed copy
    return layout


@pytest.mark.timeout(900)
async def test_from_registry_image(debian: ImportedImage, backend: NamespaceBackend,
                                   store: TemplateStore, uploads: Uploads,
                                   make_sandbox: SandboxFactory, tmp_path: Path) -> None:
    """FROM an image pulled from a loopback registry (allowed, as BAC_REGISTRY_ALLOW
    would): RUN runs as root in the image's WorkingDir with its Env, and a sandbox of the
    template runs python3 as `user` there."""
    token = unique()
    work = tmp_path / "oci"
    try:
        layout = pack_as_oci(debian, work, store.id_range.base)
        with running_registry(work / "registry") as registry:
            registry.push(f"oci:{layout}:test", "bac/debian:test")
            ref = f"{registry.host}/bac/debian:test"
            engine = BuildEngine(TemplateStore(store.data_dir, id_range=store.id_range,
                                               registries=RegistryAccess.parse(registry.host)),
                                 backend)
            recipe = BuildRecipe(source=FromImage(ref), steps=(
                EnvStep((("MARK", token),)),
                RunStep('echo "$(whoami) $(pwd) $FROM_REGISTRY $MARK" > /from-registry'),
            ))
            log = Log()
            built = await engine.build(recipe, files=uploads, resolve_template=no_templates,
                                       log=log)
    finally:
        remove_tree(work)
    assert any(ref in m for m in log.at("base")), log.at("base")
    assert (built.config.user, built.config.workdir) == ("user", "/srv/app")
    box = await make_sandbox(template=await store.built(built.digest, "from-registry"))
    result = await box.run("cat /from-registry; id -un; pwd; echo $FROM_REGISTRY $MARK; "
                           "python3 -c 'import sys; print(sys.version_info >= (3, 9))'",
                           user=built.config.user)
    assert result.stdout.split("\n")[:5] == [
        f"root /srv/app yes {token}", "user", "/srv/app", f"yes {token}", "True"], result
