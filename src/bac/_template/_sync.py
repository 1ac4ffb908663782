"""``Templates``: the blocking twin of :class:`AsyncTemplates`, method for method.

Callbacks (``on_log``) run on the SDK's background loop thread, as for ``Sandbox``.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from typing import Unpack

from bac._config import ConnectionOpts
from bac._portal import PORTAL
from bac._template._build import LogCallback
from bac._template._client import AsyncTemplates
from bac._template._models import (
    BuildInfo,
    BuildLogEntry,
    BuildState,
    TemplateInfo,
    TemplateTag,
)
from bac._template._recipe import Template


async def _make(opts: ConnectionOpts) -> AsyncTemplates:
    return AsyncTemplates(**opts)


async def _next(stream: AsyncIterator[BuildLogEntry]) -> BuildLogEntry:
    return await anext(stream)


async def _close(stream: AsyncIterator[BuildLogEntry]) -> None:
    if isinstance(stream, AsyncGenerator):
        await stream.aclose()


class Templates:
    """The template API of one Bac server, with blocking calls; see :class:`AsyncTemplates`.

    ::

        with Templates() as templates:
            templates.build(Template.from_dockerfile("Dockerfile"), "my-app", on_log=print)
    """

    def __init__(self, **opts: Unpack[ConnectionOpts]) -> None:
        # Made on the portal's loop, which is where its connection pool will be used.
        self._inner = PORTAL.run(_make(opts))

    def close(self) -> None:
        PORTAL.run(self._inner.aclose())

    def __enter__(self) -> Templates:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def build(self, template: Template, name: str, *, tags: Sequence[str] = (),
              cpu_count: int | None = None, memory_mb: int | None = None,
              skip_cache: bool = False, on_log: LogCallback | None = None) -> BuildInfo:
        """Build ``template`` as ``name`` and wait; see :meth:`AsyncTemplates.build`."""
        return PORTAL.run(self._inner.build(template, name, tags=tags, cpu_count=cpu_count,
                                            memory_mb=memory_mb, skip_cache=skip_cache,
                                            on_log=on_log))

    def build_status(self, template: str, build_id: str, logs_offset: int = 0) -> BuildState:
        return PORTAL.run(self._inner.build_status(template, build_id, logs_offset))

    def logs(self, template: str, build_id: str, *, follow: bool = False,
             offset: int = 0) -> Iterator[BuildLogEntry]:
        """The log lines of a build; with ``follow``, until it finishes."""
        stream = self._inner.logs(template, build_id, follow=follow, offset=offset)
        try:
            while True:
                try:
                    yield PORTAL.run(_next(stream))
                except StopAsyncIteration:
                    return
        finally:
            PORTAL.run(_close(stream))

    def cancel(self, template: str, build_id: str) -> bool:
        return PORTAL.run(self._inner.cancel(template, build_id))

    def list(self) -> builtins.list[TemplateInfo]:
        return PORTAL.run(self._inner.list())

    def get(self, template: str) -> TemplateInfo:
        return PORTAL.run(self._inner.get(template))

    def delete(self, template: str) -> bool:
        return PORTAL.run(self._inner.delete(template))

    def exists(self, name: str) -> bool:
        return PORTAL.run(self._inner.exists(name))

    def assign_tags(self, target: str, tags: Sequence[str]) -> builtins.list[str]:
        return PORTAL.run(self._inner.assign_tags(target, tags))

    def remove_tags(self, name: str, tags: Sequence[str]) -> None:
        PORTAL.run(self._inner.remove_tags(name, tags))

    def tags(self, template: str) -> builtins.list[TemplateTag]:
        return PORTAL.run(self._inner.tags(template))
