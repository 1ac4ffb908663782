"""Contexts: a kernel with an id, a language and a cwd; and the registry that holds them.

A context runs one cell at a time (its lock); later cells queue behind it. Restart and
removal kill the process first so a running cell ends at once (with an error line), then
take the lock. A kernel that died under a cell is restarted while the lock is still held,
so the next cell never sees a dead kernel.

The default contexts of Python and JavaScript exist (and are listed) from the start, as
E2B's are; a default context's kernel starts on its first cell unless prestarted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Coroutine
from typing import Any

from bac_kernel import _outputs
from bac_kernel._cell import Cell, Outcome
from bac_kernel._envd import EnvdClient
from bac_kernel._errors import BadRequestError, ContextNotFoundError, KernelServerError
from bac_kernel._kernel import ACK_TIMEOUT, Kernel, KernelState
from bac_kernel._languages import Language, resolve_language

DEFAULT_CWD = "/home/user"
#: Languages whose default context exists before any call (E2B lists these two).
LISTED_DEFAULTS = ("python", "javascript")

_log = logging.getLogger(__name__)


class Context:
    """One kernel, addressed by id."""

    def __init__(
        self, language: Language, cwd: str, envd: EnvdClient, *, ack_timeout: float = ACK_TIMEOUT
    ) -> None:
        self.id = str(uuid.uuid4())
        self.language = language
        self.cwd = cwd
        self.kernel = Kernel(language, cwd, ack_timeout=ack_timeout)
        self.closed = False
        self.started = False
        self._envd = envd
        self._lock = asyncio.Lock()
        self._sandbox_envs: dict[str, str] | None = None

    def describe(self) -> dict[str, str]:
        return {"id": self.id, "language": self.language.name, "cwd": self.cwd}

    async def start(self) -> None:
        """Start the kernel unless it ever was; KernelError if it cannot start."""
        if self.started:
            return
        async with self._lock:
            await self._ensure_started()

    async def _ensure_started(self) -> None:
        if not self.started:
            await self.kernel.start()
            self.started = True

    async def execute(self, cell: Cell) -> None:
        """Run `cell` after the cells before it; always ends its stream."""
        async with self._lock:
            outcome = Outcome.DONE
            try:
                if cell.abandoned:
                    return
                if self.closed:
                    raise ContextNotFoundError(f"context {self.id} was removed")
                await self._ensure_started()
                if self.kernel.state is KernelState.DEAD:
                    await self._restart_kernel()
                await self._load_sandbox_envs(cell)
                envs = self._sandbox_envs or {}
                restore = {k: envs.get(k, os.environ.get(k)) for k in cell.env_vars}
                outcome = await cell.run(self.kernel, restore)
            except KernelServerError as exc:
                cell.emit(_outputs.error(type(exc).__name__, str(exc), ""))
            finally:
                cell.finish()
            if not self.closed and (
                outcome is Outcome.KERNEL_DIED or self.kernel.state is KernelState.DEAD
            ):
                try:
                    await self._restart_kernel()
                except KernelServerError:
                    _log.exception("restarting the %s kernel failed", self.language.name)

    async def _load_sandbox_envs(self, cell: Cell) -> None:
        if self._sandbox_envs is not None:
            return
        envs = await self._envd.sandbox_envs(cell.access_token)
        if envs:
            setter = Cell("", {}, None)
            await setter.apply_env(self.kernel, envs, ())
        self._sandbox_envs = envs

    async def _restart_kernel(self) -> None:
        self._sandbox_envs = None
        await self.kernel.restart()

    async def restart(self) -> None:
        """A fresh kernel; variables, imports and env changes of the old one are gone."""
        generation = self.kernel.generation
        self.kernel.exit_reason = "the context was restarted; its state is lost"
        self.kernel.kill()
        async with self._lock:
            if not self.started:
                return  # no kernel yet: its first cell starts a fresh one anyway
            if self.kernel.generation == generation or self.kernel.state is not KernelState.READY:
                await self._restart_kernel()

    async def close(self) -> None:
        self.closed = True
        self.kernel.exit_reason = "the context was removed"
        self.kernel.kill()
        async with self._lock:
            await self.kernel.close()


class ContextRegistry:
    """All contexts of this server, plus one default context per language. `ack_timeout`:
    seconds a kernel may take to start on a request before it is killed as wedged."""

    def __init__(
        self, envd: EnvdClient, default_cwd: str = DEFAULT_CWD, *, ack_timeout: float = ACK_TIMEOUT
    ) -> None:
        if ack_timeout <= 0:
            raise ValueError("ack_timeout must be positive")
        self._envd = envd
        self._default_cwd = default_cwd
        self._ack_timeout = ack_timeout
        self._contexts: dict[str, Context] = {}
        self._defaults: dict[str, str] = {}
        self._default_locks: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        for name in LISTED_DEFAULTS:
            try:
                language = resolve_language(name)
            except BadRequestError:
                continue  # its runtime is not installed here: nothing to list
            self._add_default(Context(language, self._cwd(None), envd, ack_timeout=ack_timeout))

    def _add_default(self, context: Context) -> None:
        self._contexts[context.id] = context
        self._defaults[context.language.name] = context.id

    def _cwd(self, cwd: str | None) -> str:
        if cwd is None:
            return self._default_cwd if os.path.isdir(self._default_cwd) else os.getcwd()
        if not os.path.isabs(cwd):
            raise BadRequestError(f"cwd must be an absolute path, got {cwd!r}")
        if not os.path.isdir(cwd):
            raise BadRequestError(f"cwd {cwd!r} is not an existing directory")
        if not os.access(cwd, os.X_OK):
            raise BadRequestError(f"cwd {cwd!r} cannot be entered by the kernels' user")
        return cwd

    async def create(self, language: str | None, cwd: str | None) -> Context:
        """A new context with its kernel started. Raises on a bad language or cwd."""
        context = Context(
            resolve_language(language), self._cwd(cwd), self._envd, ack_timeout=self._ack_timeout
        )
        await context.start()
        self._contexts[context.id] = context
        return context

    async def default(self, language: str | None) -> Context:
        """The language's default context, created on first use."""
        lang = resolve_language(language)
        lock = self._default_locks.setdefault(lang.name, asyncio.Lock())
        async with lock:
            context_id = self._defaults.get(lang.name)
            if context_id is not None and context_id in self._contexts:
                return self._contexts[context_id]
            context = await self.create(lang.name, None)
            self._add_default(context)
            return context

    def get(self, context_id: str) -> Context:
        context = self._contexts.get(context_id)
        if context is None:
            raise ContextNotFoundError(f"Context {context_id!r} not found")
        return context

    def describe_all(self) -> list[dict[str, str]]:
        return [context.describe() for context in self._contexts.values()]

    async def restart(self, context_id: str) -> None:
        await self.get(context_id).restart()

    async def remove(self, context_id: str) -> None:
        context = self.get(context_id)
        del self._contexts[context_id]
        await context.close()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run `coro` in the background, owned (and awaited at close) by the registry."""
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def prestart(self, languages: list[str]) -> None:
        for language in languages:
            try:
                await (await self.default(language)).start()
            except KernelServerError:
                _log.exception("could not start the default %s context", language)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        contexts, self._contexts = list(self._contexts.values()), {}
        await asyncio.gather(*(context.close() for context in contexts), return_exceptions=True)
