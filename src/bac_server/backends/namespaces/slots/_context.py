"""What every slot operation needs: configuration, runtime, address pool, cgroups, HTTP."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bac_server.backends.base import SandboxSetupError, TemplateImage

from .._config import NamespaceConfig
from ..envd import Progress, ensure_envd_bundle
from ..network import AddressPool, Egress, NetnsStock
from ._cgroups import CgroupTree
from ._record import SlotPaths, SlotRecord, load_record
from ._runtime import OciRuntime

if TYPE_CHECKING:
    from ._stock import SlotStock


@dataclass
class Context:
    config: NamespaceConfig
    runtime: OciRuntime
    addresses: AddressPool
    cgroups: CgroupTree
    owner: str
    egress: Egress
    # Network namespaces made ahead (None: each slot makes its own).
    netns_stock: NetnsStock | None = None
    # Slots laid out ahead for restores of start snapshots (None: each lays its own out).
    slot_stock: SlotStock | None = None
    _bundles: dict[tuple[Path, ...], Path] = field(default_factory=dict)
    _bundle_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def paths(self, slot: str) -> SlotPaths:
        return SlotPaths(self.config.sandboxes_dir / slot)

    def load(self, slot: str) -> SlotRecord | None:
        return load_record(self.paths(slot))

    async def envd_bundle(self, template: TemplateImage, progress: Progress | None = None) -> Path:
        """The envd bundle for this template's Python, built on first use."""
        key = template.layer_stack
        known = self._bundles.get(key)
        # Unused bundles are swept after a day; a cached one may be gone.
        if known is not None and (known / "lib").is_dir():
            return known
        async with self._bundle_lock:
            cached = self._bundles.get(key)
            if cached is None or not (cached / "lib").is_dir():
                self._bundles[key] = await ensure_envd_bundle(
                    self.config.bundles_dir, template.rootfs, progress, lowers=template.lowers,
                    cache=self.config.bundle_cache)
        return self._bundles[key]

    def check_template(self, template: TemplateImage) -> None:
        """Fail closed on a template not shifted to this backend's id range."""
        self.check_layers(template.layer_stack, template.template_id)

    def check_layers(self, layers: tuple[Path, ...], what: str) -> None:
        """Every layer exists and its root belongs to this backend's sandbox root."""
        for layer in layers:
            try:
                owner = layer.stat().st_uid
            except FileNotFoundError as exc:
                raise SandboxSetupError(f"layer {layer} of {what} is missing") from exc
            if owner != self.config.id_range.root:
                raise SandboxSetupError(
                    f"layer {layer} of {what} is owned by uid {owner}, not the sandbox "
                    f"root {self.config.id_range.root}: it was built for another id range")

    # claims: one file per sandbox id, made with O_EXCL, naming the slot that serves it

    def claim_path(self, sandbox_id: str) -> Path:
        return self.config.claims_dir / sandbox_id

    def claimed_slot(self, sandbox_id: str) -> str | None:
        try:
            return self.claim_path(sandbox_id).read_text() or None
        except FileNotFoundError:
            return None
