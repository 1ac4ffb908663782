"""A template build in a process of its own (a second server sharing the layer store).

    python engine_build_child.py <store data dir> <backend data dir> <command>...

Builds FROM base one RUN step per command; prints each log entry as a JSON line, then
``{"digest": ...}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from bac_server.backends.base import TemplateImage, TemplateNotFound
from bac_server.backends.namespaces import NamespaceBackend, NamespaceConfig
from bac_server.templates import (
    BuildEngine,
    BuildRecipe,
    FromTemplate,
    LogEntry,
    RunStep,
    TemplateStore,
)


def show(entry: LogEntry) -> None:
    print(json.dumps({"step": entry.step, "message": entry.message}), flush=True)


async def no_templates(ref: str) -> TemplateImage:
    raise TemplateNotFound(ref)


def no_files(files_hash: str) -> Path:
    raise KeyError(files_hash)


async def main(store_dir: Path, backend_dir: Path, commands: list[str]) -> None:
    backend = NamespaceBackend(NamespaceConfig(data_dir=backend_dir, pool_size=0))
    try:
        engine = BuildEngine(TemplateStore(store_dir), backend)
        recipe = BuildRecipe(source=FromTemplate("base"),
                             steps=tuple(RunStep(c) for c in commands))
        built = await engine.build(recipe, files=no_files, resolve_template=no_templates,
                                   log=show)
        print(json.dumps({"digest": built.digest}), flush=True)
    finally:
        await backend.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]))
