"""``AsyncTemplates``: build, list, inspect, tag and delete a team's templates.

::

    async with AsyncTemplates() as templates:           # BAC_API_KEY / BAC_API_URL
        info = await templates.build(Template.from_dockerfile("Dockerfile"), "my-app",
                                     on_log=print)
    sandbox = await AsyncSandbox.create("my-app")

Names are ``name`` or ``name:tag`` (a build is reachable by each of its tags; ``default``
is the tag of a build given none). Everything goes through E2B's template API, so a Bac
server and E2B's own agree on what these calls mean.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Sequence
from typing import Any, Unpack

from bac import _errors as e
from bac._api import ApiClient
from bac._config import ConnectionConfig, ConnectionOpts
from bac._template import _build as builds
from bac._template import _logs as build_logs
from bac._template._build import LogCallback
from bac._template._logs import path_part
from bac._template._models import (
    BuildInfo,
    BuildLogEntry,
    BuildState,
    TemplateInfo,
    TemplateTag,
)
from bac._template._recipe import Template


class AsyncTemplates:
    """The template API of one Bac server, for one team (its API key)."""

    def __init__(self, **opts: Unpack[ConnectionOpts]) -> None:
        self._api = ApiClient(ConnectionConfig.resolve(**opts))

    async def aclose(self) -> None:
        await self._api.aclose()

    async def __aenter__(self) -> AsyncTemplates:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def build(self, template: Template, name: str, *, tags: Sequence[str] = (),
                    cpu_count: int | None = None, memory_mb: int | None = None,
                    skip_cache: bool = False, on_log: LogCallback | None = None) -> BuildInfo:
        """Build ``template`` as ``name`` (``name:tag`` or ``tags=`` tag the build) and
        wait for it; ``on_log`` gets each log line as the server writes it.

        Raises :class:`DockerfileError` for a COPY source missing from the context
        (before anything reaches the server) and :class:`TemplateBuildError` when a
        step fails (with the step, its Dockerfile line and its last output lines)."""
        if cpu_count is not None and cpu_count < 1:
            raise e.InvalidArgumentError(f"cpu_count must be >= 1, got {cpu_count}")
        if memory_mb is not None and memory_mb < 1:
            raise e.InvalidArgumentError(f"memory_mb must be >= 1, got {memory_mb}")
        return await builds.build(self._api, template, name, tags=tags, cpu_count=cpu_count,
                                  memory_mb=memory_mb, skip_cache=skip_cache, on_log=on_log)

    async def build_status(self, template: str, build_id: str,
                           logs_offset: int = 0) -> BuildState:
        """Where build ``build_id`` of ``template`` (name or id) is, and its log lines
        from ``logs_offset`` on (at most 100)."""
        return await build_logs.status(self._api, template, build_id, logs_offset)

    async def logs(self, template: str, build_id: str, *, follow: bool = False,
                   offset: int = 0) -> AsyncIterator[BuildLogEntry]:
        """The log lines of a build after the first ``offset``; with ``follow``, live
        until the build ends."""
        async for entry in build_logs.entries(self._api, template, build_id, follow=follow,
                                              offset=offset):
            yield entry

    async def cancel(self, template: str, build_id: str) -> bool:
        """Stop a build (it ends in error, "cancelled"); False if it had already ended."""
        return await build_logs.cancel(self._api, template, build_id)

    async def list(self) -> builtins.list[TemplateInfo]:
        """This team's templates and the public ones."""
        data = await self._api.json("GET", "/templates")
        if not isinstance(data, list):
            raise e.ServerError("the server's template list is not a list")
        return [TemplateInfo.from_api(item) for item in data]

    async def get(self, template: str) -> TemplateInfo:
        """One template by name or id, with its builds."""
        data: Any = await self._api.json("GET", f"/templates/{path_part(template)}")
        return TemplateInfo.from_api(data)

    async def delete(self, template: str) -> bool:
        """Delete a template (every build and tag); False when there was none."""
        try:
            await self._api.request("DELETE", f"/templates/{path_part(template)}",
                                    ok=(200, 204))
        except e.NotFoundError:
            return False
        return True

    async def exists(self, name: str) -> bool:
        """Whether a template is called ``name`` (yours, or another team's)."""
        return await builds.exists(self._api, name)

    async def assign_tags(self, target: str, tags: Sequence[str]) -> builtins.list[str]:
        """Point ``tags`` at the build that ``target`` (``name:tag``) names."""
        data = await self._api.json("POST", "/templates/tags",
                                    json={"target": target, "tags": list(tags)},
                                    ok=(200, 201))
        return [str(tag) for tag in data.get("tags") or []]

    async def remove_tags(self, name: str, tags: Sequence[str]) -> None:
        """Remove ``tags`` from template ``name`` (the builds stay while tagged)."""
        await self._api.request("DELETE", "/templates/tags",
                                json={"name": name, "tags": list(tags)}, ok=(200, 204))

    async def tags(self, template: str) -> builtins.list[TemplateTag]:
        """The tags of a template and the build each points at."""
        data = await self._api.json("GET", f"/templates/{path_part(template)}/tags")
        return [TemplateTag.from_api(item) for item in data]
