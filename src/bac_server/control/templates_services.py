"""The template services, wired: catalog, resolver, uploads and builds, plus start and stop.

``bac_server.app`` makes one :class:`TemplateServices` and hands its ``resolver`` to the
control plane as the template source, so sandbox creation resolves built templates per team.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from bac_server.control.builds import TemplateBuilds
from bac_server.control.keys import Team
from bac_server.control.limits import Limits
from bac_server.control.sandboxes import LIVE_STATES
from bac_server.control.templates import (
    BuiltImages,
    StartSnapshots,
    TemplateCatalog,
    TemplateResolver,
    Uploads,
    is_finished,
    split_ref,
)
from bac_server.store import BuildStore, CatalogStore, GcStore, TemplateRecord, UploadStore
from bac_server.templates import BuildEngine


@dataclass(frozen=True)
class TemplateServices:
    catalog: TemplateCatalog
    resolver: TemplateResolver
    uploads: Uploads
    builds: TemplateBuilds
    start_snapshots: StartSnapshots | None = None

    @classmethod
    def create(cls, *, catalog_store: CatalogStore, build_store: BuildStore,
               upload_store: UploadStore, images: BuiltImages, engine: BuildEngine | None,
               limits: Limits, uploads_dir: Path, max_upload_bytes: int,
               concurrency: int, start_snapshots: StartSnapshots | None = None
               ) -> TemplateServices:
        catalog = TemplateCatalog(catalog_store=catalog_store, build_store=build_store,
                                  limits=limits)
        resolver = TemplateResolver(images=images, catalog_store=catalog_store, catalog=catalog)
        uploads = Uploads(uploads_dir, upload_store, max_bytes=max_upload_bytes)
        builds = TemplateBuilds(build_store=build_store, engine=engine, catalog=catalog,
                                resolver=resolver, uploads=uploads, limits=limits,
                                concurrency=concurrency, start_snapshots=start_snapshots)
        return cls(catalog, resolver, uploads, builds, start_snapshots)

    async def start(self, gc_store: GcStore) -> list[str]:
        """End builds a previous process left unfinished; forget pins of gone sandboxes.
        Returns the ids of the builds it ended."""
        ended = await self.builds.recover()
        await gc_store.prune_pins([s.value for s in LIVE_STATES])
        return ended

    async def close(self) -> None:
        await self.builds.close()

    async def delete(self, team: Team, ref: str) -> TemplateRecord | None:
        """Delete the team's template (cancelling its unfinished builds first)."""
        template = await self.catalog.find(team, split_ref(ref)[0], own=True)
        if template is None:
            return None
        unfinished = [b for b in await self.catalog.builds(template)
                      if not is_finished(b.status)]
        await asyncio.gather(*(self.builds.cancel(team, template.template_id, b.build_id)
                               for b in unfinished), return_exceptions=True)
        deleted = await self.catalog.delete(team, template.template_id)
        if self.start_snapshots is not None:
            await self.start_snapshots.forget(template.template_id)
        return deleted
