"""A real server whose data dir is also its template root, for garbage collection tests.

The machine's template root (/var/lib/bac) is shared by everyone's tests and must never
be collected by a test; so this server keeps its layers, manifests and uploads in its own
fresh data dir. Its ``base`` is the machine's, linked in (a collection never follows that
link), and its envd bundles are hard links of the machine's (no pip install per run).
Background passes are off (``BAC_GC_INTERVAL_S=0``) and the grace period is 0, so each
test runs the collection itself, through ``bac admin gc``, and sees its effect at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat"))

from bac_process import (  # type: ignore[import-not-found]
    TEMPLATES_DIR,
    ServerProcess,
    fresh_data_dir,
    remove_data_dir,
)

from bac import ConnectionOpts, Template, Templates
from bac_server.templates import TemplateStore

BAC = [sys.executable, "-c", "from bac.cli import main; main()"]


def _link_shared(data_dir: Path) -> None:
    shared = Path(TEMPLATES_DIR)
    base = asyncio.run(TemplateStore(shared).get("base"))
    templates = data_dir / "templates"
    templates.mkdir(mode=0o700)
    (templates / "base").symlink_to(base.rootfs.parent.parent)
    bundles = data_dir / "envd"
    bundles.mkdir(mode=0o755)
    for bundle in sorted((shared / "envd").iterdir()):
        if not bundle.name.startswith(".") and (bundle / "lib").is_dir():
            subprocess.run(["cp", "-al", str(bundle), str(bundles / bundle.name)], check=True)


@pytest.fixture(scope="module")
def srv() -> Iterator[ServerProcess]:
    data_dir = fresh_data_dir("gc")
    _link_shared(data_dir)
    server = ServerProcess(data_dir, extra_env={
        "BAC_TEMPLATES_DIR": str(data_dir), "BAC_GC_INTERVAL_S": "0", "BAC_GC_GRACE_S": "0",
        "BAC_POOL_SIZE": "0", "BAC_UPLOAD_QUOTA_MB": "1", "BAC_START_SNAPSHOTS": "false"})
    server.start()
    try:
        server.create_key("gc")
        yield server
    finally:
        server.kill_all_sandboxes()
        server.stop()
    remove_data_dir(server)


def opts(server: ServerProcess) -> ConnectionOpts:
    return {"api_key": server.keys[0], "api_url": server.url}


def name(label: str) -> str:
    return f"gc-{label}-{uuid.uuid4().hex[:8]}"


def _gc_command(server: ServerProcess, extra: tuple[str, ...], env: dict[str, str]
                ) -> tuple[list[str], dict[str, str]]:
    # Only this server's data dir, which is its own template root: never the machine's.
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("BAC_", "E2B_"))}
    environ.update(BAC_DATA_DIR=str(server.data_dir), BAC_TEMPLATES_DIR=str(server.data_dir),
                   BAC_GC_GRACE_S="0", **env)
    return [*BAC, "admin", "gc", "--json", *extra], environ


def collect(server: ServerProcess, *extra: str, **env: str) -> dict[str, Any]:
    """``bac admin gc --json`` over the server's data dir, as an operator runs it."""
    argv, environ = _gc_command(server, extra, env)
    done = subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


async def collect_async(server: ServerProcess, *extra: str, **env: str) -> dict[str, Any]:
    argv, environ = _gc_command(server, extra, env)
    proc = await asyncio.create_subprocess_exec(*argv, env=environ, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    report: dict[str, Any] = json.loads(out)
    return report


def manifests_in(root: Path) -> set[str]:
    """The digests of the templates built into the template root ``root``."""
    folder = root / "templates" / "manifests"
    return {p.stem for p in folder.glob("*.json")} if folder.is_dir() else set()


def layer_keys_in(root: Path, digest: str) -> set[str]:
    """The layers the template ``digest`` of the template root ``root`` stacks (its
    rootfs too, if a layer)."""
    raw = json.loads((root / "templates" / "manifests" / f"{digest}.json").read_text())
    return {Path(p).parts[1] for p in [*raw["layers"], raw["rootfs"]]
            if Path(p).parts[0] == "layers"}


def build_in(root: Path, connection: ConnectionOpts, template: Template,
             template_name: str) -> str:
    """Build ``template`` as ``template_name`` through ``connection``, whose server keeps
    its templates in ``root``; the new manifest's digest."""
    before = manifests_in(root)
    with Templates(**connection) as templates:
        templates.build(template, template_name)
    made = manifests_in(root) - before
    assert len(made) == 1, made
    return made.pop()


def manifests(server: ServerProcess) -> set[str]:
    return manifests_in(server.data_dir)


def layer_keys(server: ServerProcess, digest: str) -> set[str]:
    return layer_keys_in(server.data_dir, digest)


def layers(server: ServerProcess) -> set[str]:
    root = server.data_dir / "layers"
    return {p.name for p in root.iterdir() if not p.name.startswith(".")} if root.is_dir() \
        else set()


def build(server: ServerProcess, template: Template, label: str) -> tuple[str, str]:
    """Build ``template`` as a new template; (its name, its manifest digest)."""
    template_name = name(label)
    return template_name, build_in(server.data_dir, opts(server), template, template_name)


def delete(server: ServerProcess, template_name: str) -> None:
    with Templates(**opts(server)) as templates:
        assert templates.delete(template_name)


def deleted(report: dict[str, Any], kind: str) -> set[str]:
    return {f["name"] for f in report["deleted"] if f["kind"] == kind}


__all__ = ["ServerProcess", "build", "build_in", "collect", "collect_async", "delete",
           "deleted", "layer_keys", "layer_keys_in", "layers", "manifests", "manifests_in",
           "name", "opts", "srv"]
