"""Running template builds: a bounded queue in front of the build engine.

At most ``concurrency`` builds run at once (each step is a sandbox using CPUs and memory);
the others stay ``waiting`` in arrival order. Each build runs in its own task, owned here:
its log lines go to the store as they come (:mod:`._log`), and it ends
``ready`` (its tags move to it, see ``BuildStore.finish_build``) or ``error`` with the reason and
the step that failed. A cancel ends it in error, reason "cancelled"; a server stop ends
running builds with "server stopped"; builds a crash interrupted are ended with "server
restarted" at the next start (:meth:`TemplateBuilds.recover`). A failed build leaves
nothing to start sandboxes from: the engine writes a manifest only when it succeeds, and a
template's tags only ever point at ready builds. Its template (registered when the build
was requested) stays, listed with the failed build's status and reason, until it is built
again or deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bac_server.backends.base import TemplateImage
from bac_server.store import BuildLogRecord, BuildRecord, BuildStore, TemplateRecord
from bac_server.templates import (
    BuildEngine,
    BuildRecipe,
    BuiltTemplate,
    CopyStep,
    LogLevel,
    TemplateError,
)

from ..errors import Conflict, NotFound, NotSupported, TeamLimitExceeded
from ..keys import Team
from ..limits import Limits
from ..templates import (
    BuildStatus,
    StartSnapshots,
    TemplateCatalog,
    TemplateResolver,
    Uploads,
    is_finished,
    sources_of,
)
from ._log import BuildLog
from ._recipe import config_record, recipe_record, secrets_of

log = logging.getLogger(__name__)

# A replica touches the rows of the builds it runs this often; with several replicas the
# leader ends those untouched for ``STALE_AFTER_S`` (their replica is gone).
LEASE_TOUCH_S = 20.0
STALE_AFTER_S = 90.0

BUILD_MIN_MEMORY_MB = 1024  # package managers need more than a small sandbox's default
MAX_UNFINISHED = 32  # builds queued or running in this process
_FOLLOW_BATCH = 500
_FOLLOW_RECHECK_S = 5.0


class _StepRefused(Exception):
    """A step cannot run (found before the engine starts); ``step`` is its number."""

    def __init__(self, message: str, step: str) -> None:
        super().__init__(message)
        self.step = step


class TemplateBuilds:
    def __init__(self, *, build_store: BuildStore, engine: BuildEngine | None,
                 catalog: TemplateCatalog, resolver: TemplateResolver, uploads: Uploads,
                 limits: Limits, concurrency: int = 1,
                 start_snapshots: StartSnapshots | None = None,
                 on_finished: Callable[[str, float], None] | None = None) -> None:
        """``on_finished(outcome, seconds)``: after each build that ran (``ready``,
        ``error``, ``cancelled``), with how long it ran."""
        self._on_finished = on_finished
        self._build_store = build_store
        self._engine = engine
        self._catalog = catalog
        self._resolver = resolver
        self._uploads = uploads
        self._limits = limits
        self._start_snapshots = start_snapshots
        self._slots = asyncio.Semaphore(max(1, concurrency))
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stop_reason: dict[str, str] = {}
        self._changed: dict[str, asyncio.Event] = {}
        self._touching: asyncio.Task[None] | None = None

    async def recover(self, untouched_s: float | None = None) -> list[str]:
        """End the builds a previous process left unfinished (at start-up). With several
        replicas, ``untouched_s``: only those no replica has touched for that long (each
        touches its own every ``LEASE_TOUCH_S`` while they run)."""
        now = datetime.now(UTC)
        return await self._build_store.fail_unfinished_builds(
            "server restarted", now,
            None if untouched_s is None else now - timedelta(seconds=untouched_s))

    async def _touch_forever(self) -> None:
        while True:
            await asyncio.sleep(LEASE_TOUCH_S)
            try:
                await self._build_store.touch_builds(sorted(self._tasks), datetime.now(UTC))
            except Exception as exc:
                log.warning("saying this replica's builds still run failed: %s", exc)

    async def close(self) -> None:
        """Stop every build of this process; they end in error, "server stopped"."""
        if self._touching is not None:
            self._touching.cancel()
            await asyncio.gather(self._touching, return_exceptions=True)
        for build_id, task in list(self._tasks.items()):
            self._stop_reason.setdefault(build_id, "server stopped")
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    # starting -----------------------------------------------------------------------------
    async def trigger(self, team: Team, ref: str, build_id: str, recipe: BuildRecipe) -> None:
        """Queue the build's steps (once: a build cannot be started twice)."""
        template, build = await self._catalog.build_of(team, ref, build_id)
        if self._engine is None:
            raise NotSupported("this server's backend cannot build templates")
        if build.recipe is not None or build_id in self._tasks or is_finished(build.status):
            raise Conflict(f"build {build_id!r} was already started (status {build.status})")
        if len(self._tasks) >= MAX_UNFINISHED:
            raise TeamLimitExceeded(
                f"{MAX_UNFINISHED} template builds are already queued or running on this "
                "server; try again when one has finished")
        # Registered before the first await, so a second trigger of the same build fails.
        task = asyncio.create_task(self._run(template, build, recipe))
        self._tasks[build_id] = task
        if self._touching is None:
            self._touching = asyncio.create_task(self._touch_forever())
        task.add_done_callback(lambda _t: self._tasks.pop(build_id, None))

    async def _run(self, template: TemplateRecord, build: BuildRecord,
                   recipe: BuildRecipe) -> None:
        build_id = build.build_id
        writer = BuildLog(self._build_store, build_id, on_write=lambda: self._notify(build_id),
                          secrets=secrets_of(recipe))
        began, outcome = time.monotonic(), "error"
        try:
            await self._build_store.start_build(build_id, from_states=[BuildStatus.WAITING.value],
                                                status=BuildStatus.WAITING.value,
                                                at=datetime.now(UTC), recipe=recipe_record(recipe))
            async with self._slots:
                if not await self._build_store.start_build(
                        build_id, from_states=sources_of(BuildStatus.BUILDING),
                        status=BuildStatus.BUILDING.value, at=datetime.now(UTC)):
                    return  # ended while it waited (cancelled)
                self._notify(build_id)
                built = await self._build(template, build, recipe, writer)
            writer.line(LogLevel.INFO, f"Template {template.name} built ({built.digest})",
                        "finalize")
            await writer.close()
            await self._build_store.finish_build(
                build_id, status=BuildStatus.READY.value, at=datetime.now(UTC),
                from_states=sources_of(BuildStatus.READY), digest=built.digest,
                config=config_record(built.config))
            outcome = "ready"
        except asyncio.CancelledError:
            outcome = "cancelled"
            await self._fail(build_id, writer, self._stop_reason.pop(build_id, "cancelled"))
        except _StepRefused as exc:
            await self._fail(build_id, writer, str(exc), exc.step)
        except TemplateError as exc:
            # The engine logged the error under the step it was running: that is the step.
            await self._fail(build_id, writer, writer.redact(str(exc)), writer.last_step,
                             logged=True)
        except Exception as exc:
            log.exception("template build %s failed unexpectedly", build_id)
            await self._fail(build_id, writer, writer.redact(f"internal error: {exc}"),
                             writer.last_step)
        finally:
            self._notify(build_id)
            if self._on_finished is not None:
                self._on_finished(outcome, time.monotonic() - began)

    async def _build(self, template: TemplateRecord, build: BuildRecord, recipe: BuildRecipe,
                     writer: BuildLog) -> BuiltTemplate:
        writer.line(LogLevel.INFO, f"Building template {template.name} "
                                   f"({template.template_id}), build {build.build_id}")
        files = await self._files(build.team_id, recipe)
        assert self._engine is not None
        vcpus = build.cpu_count or self._limits.default_cpu_count
        memory = max(build.memory_mb or self._limits.default_memory_mb, BUILD_MIN_MEMORY_MB)

        async def resolve(ref: str) -> TemplateImage:
            return await self._resolver.for_build(build.team_id, ref)

        async def names() -> list[str]:
            return await self._resolver.names_for_build(build.team_id)

        built = await self._engine.build(recipe, files=files.__getitem__,
                                         resolve_template=resolve, log=writer.add, vcpus=vcpus,
                                         memory_mb=memory, template_names=names)
        if self._start_snapshots is not None:
            await self._start_snapshots.take(
                template.template_id, built, vcpus=vcpus,
                memory_mb=build.memory_mb or self._limits.default_memory_mb,
                say=lambda level, message: writer.line(level, message, "finalize"))
        return built

    async def _files(self, team_id: str, recipe: BuildRecipe) -> dict[str, Path]:
        """The uploaded context of every COPY step; a missing one fails its step."""
        found: dict[str, Path] = {}
        for number, step in enumerate(recipe.steps, start=1):
            if not isinstance(step, CopyStep) or step.files_hash in found:
                continue
            path = await self._uploads.path(team_id, step.files_hash)
            if path is None:
                raise _StepRefused(
                    f"COPY {step.src} {step.dest}: the files of {step.src!r} "
                    f"(hash {step.files_hash[:16]}...) were never uploaded", str(number))
            found[step.files_hash] = path
        return found

    async def _fail(self, build_id: str, writer: BuildLog, reason: str,
                    step: str | None = None, *, logged: bool = False) -> None:
        with contextlib.suppress(Exception):
            if not logged:
                writer.line(LogLevel.ERROR, reason, step)
            await writer.close()
        await self._build_store.finish_build(
            build_id, status=BuildStatus.ERROR.value, at=datetime.now(UTC),
            from_states=sources_of(BuildStatus.ERROR), reason=reason, reason_step=step)

    # watching -----------------------------------------------------------------------------
    def _notify(self, build_id: str) -> None:
        event = self._changed.pop(build_id, None)
        if event is not None:
            event.set()

    async def cancel(self, team: Team, ref: str, build_id: str) -> BuildRecord:
        _template, build = await self._catalog.build_of(team, ref, build_id)
        if is_finished(build.status):
            raise Conflict(f"build {build_id!r} already finished ({build.status})")
        task = self._tasks.get(build_id)
        if task is not None:
            self._stop_reason.setdefault(build_id, "cancelled")
            task.cancel()
            await asyncio.wait({task})
        else:  # created but its steps never sent
            await self._build_store.finish_build(
                build_id, status=BuildStatus.ERROR.value, at=datetime.now(UTC),
                from_states=sources_of(BuildStatus.ERROR), reason="cancelled")
            self._notify(build_id)
        found = await self._build_store.get_build(build_id)
        if found is None:
            raise NotFound(f"build {build_id!r} not found")
        return found

    async def follow(self, build_id: str, *, levels: list[str] | None = None
                     ) -> AsyncIterator[BuildLogRecord]:
        """Every log line of the build from the first, live, until the build has ended."""
        offset = 0
        while True:
            changed = self._changed.setdefault(build_id, asyncio.Event())
            # Status before lines: lines are all written before a build is marked finished.
            build = await self._build_store.get_build(build_id)
            batch = await self._build_store.build_logs(build_id, offset=offset, limit=_FOLLOW_BATCH,
                                                       levels=levels)
            offset += len(batch)
            for entry in batch:
                yield entry
            if len(batch) == _FOLLOW_BATCH:
                continue
            if build is None or is_finished(build.status):
                if self._changed.get(build_id) is changed and build_id not in self._tasks:
                    self._changed.pop(build_id, None)
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), _FOLLOW_RECHECK_S)
