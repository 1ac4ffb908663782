"""From a template reference to the image a sandbox (or a build's FROM) starts from.

A reference is, in this order: a built-in template (``base``, ``code-interpreter`` and
their aliases, optionally ``:default``); or a team's own template, else a public one, by id,
name or alias, with an optional ``:tag`` (``default`` when absent). The tag names a ready
build; its content digest names the layers on disk (``TemplateStore.built``). Anything else,
another team's private template included, is ``TemplateNotFoundError`` (404).

A sandbox is pinned to the build it was created from, so a paused sandbox resumes on the
same layers after its template was rebuilt, re-tagged or deleted.

Two typed seams: ``BuiltImages``, what the resolver (and the start snapshots) ask of the
built templates on disk (``bac_server.templates.TemplateStore``), and ``TemplateSource``,
what the sandboxes ask of the resolver.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from bac_server.backends.base import TemplateImage, TemplateNotFound
from bac_server.store import BuildRecord, CatalogStore, SandboxPin
from bac_server.templates import BaseNotFoundError

from ..errors import TemplateNotFoundError
from ..keys import Team
from ._catalog import BUILTIN_MEMORY_MB, BUILTINS, TemplateCatalog, builtin_name
from ._refs import split_ref

log = logging.getLogger(__name__)


class BuiltImages(Protocol):
    """Built templates on disk (``bac_server.templates.TemplateStore``); both raise the
    backend's ``TemplateNotFound`` for one that is not there."""

    async def get(self, ref: str) -> TemplateImage:
        """A built-in by name or alias."""
        ...

    async def built(self, digest: str, template_id: str) -> TemplateImage:
        """A built template by its manifest's digest."""
        ...


class TemplateSource(Protocol):
    """The template lookups of sandboxes (``TemplateResolver``); each raises
    ``TemplateNotFoundError`` for a template the caller cannot start from."""

    async def get(self, ref: str) -> TemplateImage:
        """Without a team: a built-in, or a template's ``default`` build by id."""
        ...

    async def resolve(self, team: Team, ref: str) -> Resolved:
        """What a create from ``ref`` by ``team`` starts from."""
        ...

    async def pin(self, sandbox_id: str, resolved: Resolved) -> None:
        """Keep the sandbox on the build it was created from (nothing for a built-in)."""
        ...

    async def pinned(self, sandbox_id: str) -> Resolved | None:
        """The build the sandbox is pinned to; None when it came from a built-in."""
        ...


@dataclass(frozen=True)
class Resolved:
    """The image, and for a built template the build it came from and its defaults."""

    image: TemplateImage
    template_id: str | None = None  # None: a built-in
    build_id: str | None = None
    digest: str | None = None
    cpu_count: int | None = None  # the build's requested resources: the sandbox defaults
    memory_mb: int | None = None

    @classmethod
    def of_build(cls, image: TemplateImage, build: BuildRecord) -> Resolved:
        return cls(image, build.template_id, build.build_id, build.digest, build.cpu_count,
                   build.memory_mb)


@dataclass(frozen=True)
class Builtin:
    """A built-in template that is built on this server."""

    name: str
    aliases: tuple[str, ...]
    image: TemplateImage
    built_at: datetime


class TemplateResolver:
    """The control plane's ``TemplateSource``, over the catalog and the built images."""

    def __init__(self, *, images: BuiltImages, catalog_store: CatalogStore,
                 catalog: TemplateCatalog) -> None:
        self._images = images
        self._catalog_store = catalog_store
        self._catalog = catalog
        self._background: set[asyncio.Task[None]] = set()

    async def _builtin(self, ref: str) -> TemplateImage | None:
        name = builtin_name(ref)
        if name is None:
            return None
        try:
            return await self._images.get(split_ref(ref)[0])
        except TemplateNotFound as exc:
            raise TemplateNotFoundError(ref) from exc

    async def builtins(self) -> list[Builtin]:
        found = []
        for name, aliases in BUILTINS.items():
            try:
                image = await self._builtin(name)
            except TemplateNotFoundError:
                continue  # not built on this server
            if image is not None:
                stat = await asyncio.to_thread(image.rootfs.stat)
                found.append(Builtin(name, aliases, image,
                                     datetime.fromtimestamp(stat.st_mtime, UTC)))
        return found

    async def image_of(self, template_id: str, build: BuildRecord) -> TemplateImage:
        if build.digest is None:
            raise TemplateNotFoundError(template_id)
        return await self._built(build.digest, template_id)

    async def _built(self, digest: str, template_id: str) -> TemplateImage:
        try:
            return await self._images.built(digest, template_id)
        except TemplateNotFound as exc:
            raise TemplateNotFoundError(template_id) from exc

    async def get(self, ref: str) -> TemplateImage:
        """Without a team: a built-in, or a template's ``default`` build by template id."""
        builtin = await self._builtin(ref)
        if builtin is not None:
            return builtin
        name, tag = split_ref(ref)
        template = await self._catalog_store.get_template(name)
        if template is None:
            raise TemplateNotFoundError(ref)
        build = await self._catalog.tagged_build(template, tag)
        return await self.image_of(template.template_id, build)

    async def resolve(self, team: Team, ref: str) -> Resolved:
        builtin = await self._builtin(ref)
        if builtin is not None:
            name = builtin_name(ref)
            return Resolved(builtin, memory_mb=None if name is None
                            else BUILTIN_MEMORY_MB.get(name))
        name, tag = split_ref(ref)
        template = await self._catalog.find(team, name)
        if template is None:
            raise TemplateNotFoundError(ref)
        build = await self._catalog.tagged_build(template, tag)
        return Resolved.of_build(await self.image_of(template.template_id, build), build)

    async def for_build(self, team_id: str, ref: str) -> TemplateImage:
        """The image a build's ``FROM <template>`` names, as seen by the building team:
        the engine's ``TemplateNotFound`` when it has no template of that name, a
        ``BaseNotFoundError`` saying so when the template has no ready build to start
        from."""
        team = Team(team_id, team_id)
        try:
            return (await self.resolve(team, ref)).image
        except TemplateNotFoundError as exc:
            name, tag = split_ref(ref)
            if builtin_name(ref) is not None or await self._catalog.find(team, name) is None:
                raise TemplateNotFound(str(exc)) from exc
            raise BaseNotFoundError(
                f"template {name!r} has no ready build{f' tagged {tag!r}' if tag else ''} to "
                f"start from (its builds failed or have not finished: bac template info "
                f"{name})") from exc

    async def names_for_build(self, team_id: str) -> list[str]:
        """Every name a build of the team may start FROM: the built-ins', its own
        templates' and the public ones' (what a FROM naming none is compared with)."""
        names = [name for builtin, aliases in BUILTINS.items() for name in (builtin, *aliases)]
        for template in await self._catalog_store.visible_templates(team_id):
            names += [template.name, *template.aliases]
        return list(dict.fromkeys(names))

    async def pin(self, sandbox_id: str, resolved: Resolved) -> None:
        template_id = resolved.template_id
        if template_id is None or resolved.build_id is None or resolved.digest is None:
            return
        await self._catalog_store.pin_sandbox(SandboxPin(sandbox_id, template_id, resolved.build_id,
                                                         resolved.digest))
        # Usage counters are informative: never make a create wait for them.
        task = asyncio.create_task(self._count_spawn(template_id))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _count_spawn(self, template_id: str) -> None:
        try:
            await self._catalog_store.template_spawned(template_id, datetime.now(UTC))
        except Exception:
            log.exception("counting a sandbox of template %s", template_id)

    async def pinned(self, sandbox_id: str) -> Resolved | None:
        """The build the sandbox was created from, if it was created from a built one."""
        pin = await self._catalog_store.sandbox_pin(sandbox_id)
        if pin is None:
            return None
        found = await self._built(pin.digest, pin.template_id)
        return Resolved(found, pin.template_id, pin.build_id, pin.digest)
