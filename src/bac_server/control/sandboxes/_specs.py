"""The backend's view of an existing sandbox (``SandboxSpec``), for steps that need it
again after create: resuming a sandbox paused without its memory starts envd afresh and
initialises it with the sandbox's token and environment; checkpoints are restored the same
way when they hold files only."""

from __future__ import annotations

from bac_server.backends.base import SandboxSpec, TemplateImage

from ..templates import TemplateSource
from ._network import policy_of
from ._registry import LiveSandbox


async def sandbox_image(templates: TemplateSource, sbx: LiveSandbox) -> TemplateImage:
    """The image the sandbox was created from: its pinned build when it came from a built
    template (which may have been rebuilt or deleted since), else its template now."""
    pinned = await templates.pinned(sbx.sandbox_id)
    if pinned is not None:
        return pinned.image
    return await templates.get(sbx.template_id)


async def spec_of(templates: TemplateSource, sbx: LiveSandbox) -> SandboxSpec:
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
