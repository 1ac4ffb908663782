"""The template build engine: a recipe in, a built template (its digest) out.

    engine = BuildEngine(store, backend)          # backend: a ``Builder``
    built = await engine.build(recipe, files=..., resolve_template=..., log=print)
    image = await store.built(built.digest, "my-template")   # a TemplateImage

A build resolves its FROM (log step ``base``), runs each step (log step ``"1"``, ``"2"``,
...) and finishes with ``finalize``. RUN, COPY, USER (when it has to make the account)
and finalize each make a layer, found in the cache when nothing it depends on changed
(``_state``); ENV and WORKDIR only change the state later steps run in. ``force``
on a step (or the recipe) rebuilds from that step on. Nothing is recorded until the
manifest is written, last: a failed or cancelled build leaves no manifest (the layers
it finished stay in the cache, as Docker's do). When the chain of layers gets deeper
than ``max_depth`` the oldest are squashed into one rootfs (``_squash``). The run itself
is ``_run``. A failure is a ``TemplateBuildError`` naming the step and why: a command
that exited non-zero is ``StepFailed``, a full disk ``DiskFullError`` (the tree is drawn
in ``templates._errors``).
"""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

from bac_server.backends.base import BackendError, Builder

from .._errors import DiskFullError, TemplateError
from .._steps import BuildRecipe, LogLevel
from .._store import TemplateStore
from ..gc import build_guard
from ..layers import BuiltTemplate, LayerStore
from ._missing_base import TemplateNames
from ._run import BuildRun, FilesLookup
from ._runner import LogCallback, StepRunner
from ._source import ResolveTemplate
from ._squash import KEEP, MAX_DEPTH
from ._validate import validate

DEFAULT_HOST_CA = Path("/etc/ssl/certs")
__all__ = ["DEFAULT_HOST_CA", "BuildEngine", "FilesLookup"]


class BuildEngine:
    """Builds recipes into layered templates under the store's data directory."""

    def __init__(self, store: TemplateStore, builder: Builder, *,
                 max_depth: int = MAX_DEPTH, keep: int = KEEP,
                 host_ca: Path | None = DEFAULT_HOST_CA) -> None:
        if not 1 <= keep < max_depth:
            raise ValueError(f"keep must be 1..{max_depth - 1}, got {keep}")
        self.store = store
        self.builder = builder
        self.layers = LayerStore(store.data_dir / "layers")
        self.max_depth, self.keep = max_depth, keep
        usable = host_ca is not None and (host_ca / "ca-certificates.crt").is_file()
        self.host_ca = host_ca if usable else None
        self._swept = False

    def _setup(self) -> None:
        self.layers.setup()
        if not self._swept:
            self.layers.sweep()  # what builds killed with their process left behind
            self._swept = True

    async def build(self, recipe: BuildRecipe, *, files: FilesLookup,
                    resolve_template: ResolveTemplate, log: LogCallback,
                    vcpus: int = 2, memory_mb: int = 2048,
                    template_names: TemplateNames | None = None) -> BuiltTemplate:
        """Build ``recipe``; its manifest is on disk when this returns. Every failure is
        also the last entry of ``log``. ``template_names``: the templates the build could
        start from, suggested when its FROM names nothing."""
        runner = StepRunner(self.builder, self.layers, log, vcpus, memory_mb, self.host_ca)
        build = BuildRun(self.store, self.layers, recipe, files, runner,
                         max_depth=self.max_depth, keep=self.keep)
        try:
            validate(recipe)
            # Held for the whole run: the layers it takes from the cache are named by
            # nothing until its manifest is written, so no collection may run meanwhile.
            async with build_guard(self.store.data_dir):
                await asyncio.to_thread(self._setup)
                return await build.run(resolve_template, template_names)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            full = DiskFullError(f"no space left on the device holding "
                                 f"{self.store.data_dir}: {exc}")
            runner.say(build.current, str(full), LogLevel.ERROR)
            raise full from exc
        except (TemplateError, BackendError) as exc:  # FROM not found, image import failed
            runner.say(build.current, str(exc), LogLevel.ERROR)
            raise
