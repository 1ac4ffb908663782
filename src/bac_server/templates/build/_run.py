"""One run of a build: the source, each step in order, finalize, the manifest.

``BuildRun`` holds what a build has so far: the key every next layer chains from, the
rootfs and the layers over it, and the state (ENV, USER, WORKDIR) steps run in. Layers
are made or found through ``StepRunner.layer``; nothing is recorded until the manifest
is written, last.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from .._errors import TemplateBuildError
from .._steps import (
    BuildRecipe,
    CopyStep,
    EnvStep,
    RunStep,
    Step,
    TemplateConfig,
    UserStep,
    WorkdirStep,
)
from .._store import TemplateStore
from ..layers import (
    BuiltTemplate,
    LayerInfo,
    LayerStore,
    LayerWork,
    config_json,
    digest,
    make_built,
    write_manifest,
)
from ._copy import CONTEXT_MOUNT, copy_argv, destination, match, unpack
from ._finalize import ensure_user_argv, finalize_argv, needs_account
from ._missing_base import TemplateNames
from ._runner import StepRunner
from ._source import ResolveTemplate, resolve_source
from ._squash import squash
from ._state import BuildState, describe, step_key

FINALIZE_VERSION = 1
FilesLookup = Callable[[str], Path]
Make = Callable[[LayerWork], Awaitable[dict[str, str]]]


class BuildRun:
    """One run of ``BuildEngine.build``: the chain so far and the state steps run in."""

    def __init__(self, store: TemplateStore, layers: LayerStore, recipe: BuildRecipe,
                 files: FilesLookup, runner: StepRunner, *, max_depth: int, keep: int) -> None:
        self.store, self.layers, self.recipe, self.files, self.runner = (
            store, layers, recipe, files, runner)
        self.max_depth, self.keep = max_depth, keep
        self.nonce = secrets.token_hex(8)  # salts the keys of forced steps
        self.forcing = recipe.force
        self.current = "base"
        self.cached = self.made = 0
        self.key = ""
        self.rootfs = Path("/")
        self.chain: list[Path] = []  # layer diffs over rootfs, bottom first
        self.state = BuildState()

    @property
    def lowers(self) -> tuple[Path, ...]:
        return (*reversed(self.chain), self.rootfs)

    async def run(self, resolve_template: ResolveTemplate,
                  template_names: TemplateNames | None = None) -> BuiltTemplate:
        started = time.monotonic()
        self.runner.say("base", f"FROM {self.recipe.source.ref}")
        source = await resolve_source(self.recipe.source, self.store, resolve_template,
                                      lambda line: self.runner.say("base", line),
                                      template_names)
        self.runner.say("base", f"using {source.description}")
        self.key, self.rootfs, self.state = source.key, source.rootfs, source.state
        self.chain = list(source.layers)
        for index, step in enumerate(self.recipe.steps, 1):
            self.current = str(index)
            await self._step(index, step)
        self.current = "finalize"
        config, allow_setuid = await self._finalize(source.from_image)
        await self._shallow("finalize")
        data_dir = self.store.data_dir
        built = make_built(config, self.rootfs, tuple(self.chain), allow_setuid, data_dir)
        await asyncio.to_thread(write_manifest, built, data_dir)
        self.runner.say("finalize", f"template {built.digest} built in "
                        f"{time.monotonic() - started:.1f}s: {self.made} layers made, "
                        f"{self.cached} from cache, {len(self.chain)} over the rootfs")
        return built

    async def _step(self, index: int, step: Step) -> None:
        label = f"Step {index}/{len(self.recipe.steps)}: {describe(step)}"
        number = str(index)
        self.forcing = self.forcing or step.force
        if isinstance(step, EnvStep):
            self.state = self.state.with_env(step.values)
        elif isinstance(step, WorkdirStep):
            self.state = self.state.with_workdir(step.path)
        elif isinstance(step, UserStep) and not needs_account(step.user):
            name = step.user.partition(":")[0]
            self.state = self.state.with_user(step.user, "/root" if name in ("root", "0")
                                              else "/")
        elif isinstance(step, UserStep):
            info = await self._layer(number, label, step, self._ensure_user(number, step.user))
            self.state = self.state.with_user(step.user, info.facts.get("home") or "/")
            return
        elif isinstance(step, RunStep):
            await self._layer(number, label, step, self._run(number, step))
            return
        else:
            await self._layer(number, label, step, self._copy(number, step))
            return
        self.runner.say(number, label)

    async def _layer(self, number: str, label: str, step: Step | None,
                     make: Make, key: str | None = None) -> LayerInfo:
        await self._shallow(number)
        if key is None:
            assert step is not None
            key = step_key(self.key, step, self.state, self.nonce if self.forcing else None)
        started = time.monotonic()

        async def build(work: LayerWork) -> dict[str, str]:
            self.runner.say(number, label)
            return await make(work)

        info, cached = await self.runner.layer(key, label, build)
        if cached:
            self.runner.say(number, f"{label} CACHED")
            self.cached += 1
        else:
            self.runner.say(number, f"done in {time.monotonic() - started:.1f}s, "
                                    f"layer {key} ({info.size >> 10} KiB)")
            self.made += 1
        self.key = key
        if not info.empty:
            self.chain.append(self.layers.diff(key))
        return info

    async def _shallow(self, number: str) -> None:
        if len(self.chain) > self.max_depth:
            self.rootfs, self.chain = await squash(self.runner, number, self.rootfs,
                                                   self.chain, self.keep)

    def _run(self, number: str, step: RunStep) -> Make:
        async def make(work: LayerWork) -> dict[str, str]:
            return await self.runner.command(
                number, "RUN", self.lowers, work.upper,
                ("/bin/sh", "-c", step.command), env=self.state.step_env(),
                user=step.user or self.state.user, cwd=self.state.cwd, network=True)
        return make

    def _copy(self, number: str, step: CopyStep) -> Make:
        async def make(work: LayerWork) -> dict[str, str]:
            try:
                archive = self.files(step.files_hash)
            except (KeyError, LookupError, OSError) as exc:
                raise TemplateBuildError(f"{describe(step)}: its files ({step.files_hash}) "
                                         "were not uploaded") from exc
            context = work.scratch / "context"
            await asyncio.to_thread(work.scratch.mkdir, 0o700)
            owner = self.store.id_range.root
            await unpack(archive, context, owner, step.src)
            sources = await asyncio.to_thread(match, context, step.src)
            argv = copy_argv(destination(step.dest, self.state.cwd), step.user, step.mode,
                             sources)
            return await self.runner.command(
                number, describe(step), self.lowers, work.upper, argv,
                env=self.state.step_env(),
                binds=((context, CONTEXT_MOUNT),))
        return make

    def _ensure_user(self, number: str, user: str) -> Make:
        async def make(work: LayerWork) -> dict[str, str]:
            return await self.runner.command(
                number, f"USER {user}", self.lowers, work.upper,
                ensure_user_argv(user), env=self.state.step_env(), says_why=True)
        return make

    async def _finalize(self, from_image: bool) -> tuple[TemplateConfig, bool]:
        if from_image and not self.state.user_set:
            # E2B's default: sandboxes run as `user` unless the image or recipe chose one.
            user = self.state.user if needs_account(self.state.user) else "user"
            info = await self._layer("finalize", f"finalize: user {user}", UserStep(user),
                                     self._ensure_user("finalize", user))
            self.state = self.state.with_user(user, info.facts.get("home") or "/")
        state = self.state
        config = TemplateConfig(user=state.user.partition(":")[0], workdir=state.cwd,
                                env=state.env, start_cmd=self.recipe.start_cmd,
                                ready_cmd=self.recipe.ready_cmd)

        async def make(work: LayerWork) -> dict[str, str]:
            return await self.runner.command(
                "finalize", "finalize", self.lowers, work.upper, finalize_argv(config),
                env=state.step_env(), says_why=True)

        key = digest("finalize", self.key, FINALIZE_VERSION, config_json(config),
                     self.nonce if self.forcing else None)
        info = await self._layer("finalize", "finalize", None, make, key)
        return config, info.facts.get("sudo") == "yes"
