"""The template catalog: a team's templates, their builds and tags, and who may see what.

A template belongs to one team and has a name unique within it. It is private (only its
team finds it) or public (every team finds it, by id, name or alias; its own team's
templates of the same name come first). Another team's private template is answered exactly
like a template that does not exist, everywhere: its existence is never leaked.

The built-in templates (``base``, ``code-interpreter``, ``desktop``) are public, belong to
no team, and their names are reserved.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from bac_server.store import (
    BuildLogRecord,
    BuildRecord,
    BuildStore,
    CatalogStore,
    StoreConflict,
    TagRecord,
    TemplateRecord,
)
from bac_server.templates import LAYERS

from ..errors import Conflict, InvalidRequest, NotFound, TemplateNotFoundError
from ..keys import Team
from ..limits import Limits
from ._build_states import BuildStatus
from ._refs import (
    DEFAULT_TAG,
    check_tags,
    new_build_id,
    new_template_id,
    parse_build_name,
    split_ref,
)

# Built-in templates: name → aliases (what bac_server.templates builds: base and the
# layers derived from it).
BUILTINS: dict[str, tuple[str, ...]] = {
    "base": (), **{layer.name: layer.aliases for layer in LAYERS}}
# Built-ins whose sandboxes need more memory than the server's default, when a create
# asks for none (MiB; at most the server's maximum).
BUILTIN_MEMORY_MB: dict[str, int] = {
    layer.name: layer.memory_mb for layer in LAYERS if layer.memory_mb is not None}


def builtin_name(ref: str) -> str | None:
    """The built-in template ``ref`` names (with an optional ``:default`` tag), if any."""
    name, tag = split_ref(ref)
    if tag not in (None, DEFAULT_TAG):
        return None
    return next((b for b, aliases in BUILTINS.items() if name == b or name in aliases), None)


@dataclass(frozen=True)
class TemplateSummary:
    """A template with the build that serves it (its ``default`` tag) and its newest one."""

    template: TemplateRecord
    serving: BuildRecord | None
    latest: BuildRecord | None


class TemplateCatalog:
    def __init__(self, *, catalog_store: CatalogStore, build_store: BuildStore,
                 limits: Limits, on_delete: Callable[[], None] | None = None) -> None:
        self._catalog_store = catalog_store
        self._build_store = build_store
        self._limits = limits
        # Called after a template is deleted (the storage collector's ``soon``).
        self._on_delete = on_delete

    # lookups ------------------------------------------------------------------------------
    async def find(self, team: Team, ref: str, *, own: bool = False) -> TemplateRecord | None:
        """The template ``ref`` (id, name or alias, without a tag) names for ``team``."""
        by_id = await self._catalog_store.get_template(ref)
        if by_id is not None and (by_id.team_id == team.team_id or
                                  (by_id.public and not own)):
            return by_id
        matches = [t for t in await self._catalog_store.visible_templates(team.team_id)
                   if ref == t.name or ref in t.aliases]
        mine = [t for t in matches if t.team_id == team.team_id]
        if mine or own:
            return mine[0] if mine else None
        return matches[0] if matches else None

    async def by_id(self, template_id: str) -> TemplateRecord | None:
        """Any team's template by id (for callers authorised by other means)."""
        return await self._catalog_store.get_template(template_id)

    async def owned(self, team: Team, ref: str) -> TemplateRecord:
        found = await self.find(team, split_ref(ref)[0], own=True)
        if found is None:
            raise TemplateNotFoundError(ref)
        return found

    async def visible(self, team: Team, ref: str) -> TemplateRecord:
        found = await self.find(team, split_ref(ref)[0])
        if found is None:
            raise TemplateNotFoundError(ref)
        return found

    async def build_of(self, team: Team, ref: str, build_id: str) -> tuple[TemplateRecord,
                                                                           BuildRecord]:
        """One of the team's own builds (a build of another team's template is not found)."""
        template = await self.owned(team, ref)
        build = await self._build_store.get_build(build_id)
        if build is None or build.template_id != template.template_id:
            raise NotFound(f"build {build_id!r} of template {ref!r} not found")
        return template, build

    async def tagged_build(self, template: TemplateRecord, tag: str | None) -> BuildRecord:
        """The ready build ``tag`` (default: ``default``) of the template points at."""
        wanted = tag or DEFAULT_TAG
        for found in await self._catalog_store.list_tags(template.template_id):
            if found.tag == wanted:
                build = await self._build_store.get_build(found.build_id)
                if build is not None and build.status == BuildStatus.READY.value:
                    return build
        suffix = "" if tag is None else f":{tag}"
        raise TemplateNotFoundError(f"{template.name}{suffix}")

    # builds -------------------------------------------------------------------------------
    async def request_build(self, team: Team, ref: str, *, tags: list[str],
                            cpu_count: int | None, memory_mb: int | None
                            ) -> tuple[TemplateRecord, BuildRecord]:
        """``POST /v3/templates``: the team's template named ``name`` (made when missing)
        and a new waiting build of it that takes ``tag`` (or ``default``) and ``tags``."""
        name, tag = parse_build_name(ref)
        if builtin_name(name) is not None:
            raise Conflict(f"template name {name!r} is reserved for a built-in template")
        build_tags = tuple(dict.fromkeys((tag or DEFAULT_TAG, *check_tags(tags))))
        if cpu_count is not None:
            self._limits.cpus(cpu_count)
        if memory_mb is not None:
            self._limits.memory(memory_mb)
        now = datetime.now(UTC)
        template = await self.find(team, name, own=True)
        if template is None:
            template = TemplateRecord(template_id=new_template_id(), team_id=team.team_id,
                                      name=name, public=False, created_at=now, updated_at=now)
            try:
                await self._catalog_store.add_template(template)
            except StoreConflict:
                # Another request made it first: build that one.
                template = await self.owned(team, name)
        build = BuildRecord(build_id=new_build_id(), template_id=template.template_id,
                            team_id=team.team_id, status=BuildStatus.WAITING.value,
                            created_at=now, updated_at=now, cpu_count=cpu_count,
                            memory_mb=memory_mb, tags=build_tags)
        await self._build_store.add_build(build)
        return template, build

    # listing and management ---------------------------------------------------------------
    async def summaries(self, team: Team) -> list[TemplateSummary]:
        visible = await self._catalog_store.visible_templates(team.team_id)
        return [await self.summary(t) for t in visible]

    async def summary(self, template: TemplateRecord) -> TemplateSummary:
        builds = await self._build_store.list_builds(template.template_id)
        try:
            serving: BuildRecord | None = await self.tagged_build(template, None)
        except TemplateNotFoundError:
            serving = next((b for b in builds if b.status == BuildStatus.READY.value), None)
        return TemplateSummary(template, serving, builds[0] if builds else None)

    async def builds(self, template: TemplateRecord) -> list[BuildRecord]:
        return await self._build_store.list_builds(template.template_id)

    async def logs(self, build_id: str, *, offset: int = 0, limit: int,
                   levels: list[str] | None = None, since: datetime | None = None,
                   newest_first: bool = False) -> list[BuildLogRecord]:
        return await self._build_store.build_logs(build_id, offset=offset, limit=limit,
                                                  levels=levels, since=since,
                                                  newest_first=newest_first)

    async def set_public(self, team: Team, ref: str, public: bool) -> TemplateRecord:
        template = await self.owned(team, ref)
        await self._catalog_store.update_template(template.template_id, at=datetime.now(UTC),
                                                  public=public)
        return await self.owned(team, template.template_id)

    async def delete(self, team: Team, ref: str) -> TemplateRecord | None:
        """Forget the team's template, its builds, logs and tags. Sandboxes created from it
        keep running (and resuming): they hold their layers. None when there is none."""
        template = await self.find(team, split_ref(ref)[0], own=True)
        if template is None:
            return None
        await self._catalog_store.delete_template(template.template_id)
        if self._on_delete is not None:
            self._on_delete()
        return template

    # tags ---------------------------------------------------------------------------------
    async def assign_tags(self, team: Team, target: str, tags: list[str]) -> tuple[str,
                                                                                   list[str]]:
        """Point ``tags`` at the build ``target`` (``name:tag``) points at."""
        name, tag = split_ref(target)
        template = await self.owned(team, name)
        build = await self.tagged_build(template, tag)
        if not tags:
            raise InvalidRequest("tags must name at least one tag")
        wanted = list(check_tags(tags))
        await self._catalog_store.set_tags(template.template_id, wanted, build.build_id,
                                           datetime.now(UTC))
        return build.build_id, wanted

    async def remove_tags(self, team: Team, name: str, tags: list[str]) -> None:
        template = await self.owned(team, name)
        if not tags:
            raise InvalidRequest("tags must name at least one tag")
        if not await self._catalog_store.delete_tags(template.template_id, check_tags(tags)):
            raise NotFound(f"template {name!r} has none of the tags {', '.join(tags)}")

    async def tags(self, team: Team, ref: str) -> list[TagRecord]:
        template = await self.visible(team, ref)
        return await self._catalog_store.list_tags(template.template_id)
