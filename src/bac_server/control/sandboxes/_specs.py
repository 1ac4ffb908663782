"""The backend's view of an existing sandbox (``SandboxSpec``), for steps that need it
again after create: resuming a sandbox paused without its memory starts envd afresh and
initialises it with the sandbox's token and environment; checkpoints are restored the same
way when they hold files only."""

from __future__ import annotations

import inspect
from typing import Any, Protocol

from bac_server.backends.base import SandboxSpec, TemplateImage, TemplateNotFound

from ..errors import TemplateNotFoundError
from ..templates import TeamTemplates
from ._network import policy_of
from ._registry import LiveSandbox


class Templates(Protocol):
    """Finds a built template by id or alias (``bac_server.templates.TemplateStore``)."""

    def get(self, ref: str) -> Any: ...


async def template_image(templates: Templates, ref: str) -> TemplateImage:
    try:
        found = templates.get(ref)
        if inspect.isawaitable(found):
            found = await found
    except TemplateNotFound as exc:
        raise TemplateNotFoundError(ref) from exc
    if not isinstance(found, TemplateImage):
        raise TemplateNotFoundError(ref)
    return found


async def sandbox_image(templates: Templates, sbx: LiveSandbox) -> TemplateImage:
    """The image the sandbox was created from: its pinned build when it came from a built
    template (which may have been rebuilt or deleted since), else its template now."""
    if isinstance(templates, TeamTemplates):
        pinned = await templates.pinned(sbx.sandbox_id)
        if pinned is not None:
            return pinned.image
    return await template_image(templates, sbx.template_id)


async def spec_of(templates: Templates, sbx: LiveSandbox) -> SandboxSpec:
    return SandboxSpec(
        sandbox_id=sbx.sandbox_id,
        template=await sandbox_image(templates, sbx),
        vcpus=sbx.cpu_count,
        memory_mb=sbx.memory_mb,
        disk_mb=sbx.disk_mb,
        env_vars=dict(sbx.env_vars),
        envd_access_token=sbx.envd_access_token,
        network=policy_of(sbx),
    )
