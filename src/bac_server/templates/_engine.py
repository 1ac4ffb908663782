"""The template build engine: a recipe in, a built template (its digest) out.

    engine = BuildEngine(store, backend)          # backend: a ``Builder``
    built = await engine.build(recipe, files=..., resolve_template=..., log=print)
    image = await store.built(built.digest, "my-template")   # a TemplateImage

A build resolves its FROM (log step ``base``), runs each step (log step ``"1"``, ``"2"``,
...) and finishes with ``finalize``. RUN, COPY, USER (when it has to make the account)
and finalize each make a layer, found in the cache when nothing it depends on changed
(``_build_state``); ENV and WORKDIR only change the state later steps run in. ``force``
on a step (or the recipe) rebuilds from that step on. Nothing is recorded until the
manifest is written, last: a failed or cancelled build leaves no template (the layers
it finished stay in the cache, as Docker's do). When the chain of layers gets deeper
than ``max_depth`` the oldest are squashed into one rootfs (``_squash``).

Error tree (template layer, builds)::

    TemplateBuildError          the build failed; the message names the step and why
    ├── StepFailed              a RUN (or USER/finalize) command exited non-zero: its exit
    │                           code and last output lines
    └── DiskFullError           the disk holding the data directory is full
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bac_server.backends.base import BackendError, Builder

from ._build_state import BuildState, describe, digest, step_key
from ._copy_step import CONTEXT_MOUNT, copy_argv, destination, match, unpack
from ._errors import TemplateBuildError, TemplateError
from ._finalize import ensure_user_argv, finalize_argv, needs_account
from ._layer_step import LogCallback, StepRunner
from ._layer_store import LayerInfo, LayerStore, LayerWork
from ._manifest import BuiltTemplate, config_json, make_built, write_manifest
from ._source import ResolveTemplate, resolve_source
from ._squash import KEEP, MAX_DEPTH, squash
from ._steps import (
    BuildRecipe,
    CopyStep,
    EnvStep,
    LogLevel,
    RunStep,
    Step,
    TemplateConfig,
    UserStep,
    WorkdirStep,
)
from ._store import TemplateStore
from ._validate import validate

FINALIZE_VERSION = 1
DEFAULT_HOST_CA = Path("/etc/ssl/certs")
FilesLookup = Callable[[str], Path]
Make = Callable[[LayerWork], Awaitable[dict[str, str]]]


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
                    vcpus: int = 2, memory_mb: int = 2048) -> BuiltTemplate:
        """Build ``recipe``; its manifest is on disk when this returns."""
        validate(recipe)
        await asyncio.to_thread(self._setup)
        runner = StepRunner(self.builder, self.layers, log, vcpus, memory_mb, self.host_ca)
        build = _Build(self, recipe, files, runner)
        try:
            return await build.run(resolve_template)
        except (TemplateError, BackendError) as exc:  # FROM not found, image import failed
            runner.say(build.current, str(exc), LogLevel.ERROR)
            raise


class _Build:
    """One run of ``BuildEngine.build``: the chain so far and the state steps run in."""

    def __init__(self, engine: BuildEngine, recipe: BuildRecipe, files: FilesLookup,
                 runner: StepRunner) -> None:
        self.engine, self.recipe, self.files, self.runner = engine, recipe, files, runner
        self.layers = engine.layers
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

    async def run(self, resolve_template: ResolveTemplate) -> BuiltTemplate:
        started = time.monotonic()
        self.runner.say("base", f"FROM {self.recipe.source.ref}")
        source = await resolve_source(self.recipe.source, self.engine.store, resolve_template,
                                      lambda line: self.runner.say("base", line))
        self.runner.say("base", f"using {source.description}")
        self.key, self.rootfs, self.state = source.key, source.rootfs, source.state
        self.chain = list(source.layers)
        for index, step in enumerate(self.recipe.steps, 1):
            self.current = str(index)
            await self._step(index, step)
        self.current = "finalize"
        config, allow_setuid = await self._finalize(source.from_image)
        await self._shallow("finalize")
        data_dir = self.engine.store.data_dir
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
        if len(self.chain) > self.engine.max_depth:
            self.rootfs, self.chain = await squash(self.runner, number, self.rootfs,
                                                   self.chain, self.engine.keep)

    def _run(self, number: str, step: RunStep) -> Make:
        async def make(work: LayerWork) -> dict[str, str]:
            return await self.runner.command(
                number, f"Step {number} (RUN {step.command})", self.lowers, work.upper,
                ("/bin/sh", "-c", step.command), env=self.state.step_env(),
                user=step.user or self.state.user, cwd=self.state.cwd, network=True)
        return make

    def _copy(self, number: str, step: CopyStep) -> Make:
        async def make(work: LayerWork) -> dict[str, str]:
            try:
                archive = self.files(step.files_hash)
            except (KeyError, LookupError, OSError) as exc:
                raise TemplateBuildError(f"Step {number} (COPY {step.src}): its files "
                                         f"({step.files_hash}) were not uploaded") from exc
            context = work.scratch / "context"
            await asyncio.to_thread(work.scratch.mkdir, 0o700)
            owner = self.engine.store.id_range.root
            await asyncio.to_thread(unpack, archive, context, owner, step.src)
            sources = await asyncio.to_thread(match, context, step.src)
            argv = copy_argv(destination(step.dest, self.state.cwd), step.user, step.mode,
                             sources)
            return await self.runner.command(
                number, f"Step {number} (COPY {step.src} {step.dest})", self.lowers,
                work.upper, argv, env=self.state.step_env(),
                binds=((context, CONTEXT_MOUNT),))
        return make

    def _ensure_user(self, number: str, user: str) -> Make:
        async def make(work: LayerWork) -> dict[str, str]:
            return await self.runner.command(
                number, f"Step {number} (USER {user})", self.lowers, work.upper,
                ensure_user_argv(user), env=self.state.step_env())
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
                env=state.step_env())

        key = digest("finalize", self.key, FINALIZE_VERSION, config_json(config),
                     self.nonce if self.forcing else None)
        info = await self._layer("finalize", "finalize", None, make, key)
        return config, info.facts.get("sudo") == "yes"
