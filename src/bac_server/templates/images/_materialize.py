"""Import the image a template build starts FROM: a Debian suite, an OCI image on disk,
or an image in a registry, as a root filesystem shifted to the sandbox id range.

Public API::

    image = await materialize_image(FromImage("127.0.0.1:5000/team/app:1"),
                                    data_dir=data_dir, id_range=IdRange(), progress=print)
    image.digest    # "sha256:<hex>" (the image's manifest), or a Debian recipe digest
    image.rootfs    # <data_dir>/images/<digest>/rootfs, read-only from now on
    image.config    # ImageConfig(env, user, workdir, cmd) from the image's config

How: a registry is first checked to be one a build may reach (``_registries``: not on
this machine or a private network unless the operator allows it); registry and local
images are copied by skopeo into a private OCI layout, unpacked by
umoci rootless as sandbox root's host uid (layer order and whiteouts per the OCI spec;
device nodes become empty files, file capabilities are dropped), and shifted to the
sandbox ids the unpacking recorded; Debian suites are built by mmdebstrap. Each
result is cached by digest (``_cache``); a registry is asked only for the manifest
digest (one small request) before a cached image is reused. Failures raise
:class:`ImageError` and leave nothing behind, also on cancellation; a registry out of
reach is named (``ImageError.registry``), and for a Docker Hub name so is the way around
it, ``BAC_REGISTRY_MIRROR``.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bac_server.cancel_safe import off_loop
from bac_server.host import IdRange

from .._errors import TemplateBuildError
from .._idshift import shift_recorded_ownership
from .._steps import FromImage
from ._cache import (
    entry_lock,
    entry_name,
    images_root,
    load,
    publish,
    recall,
    remember,
    scratch_dir,
)
from ._debian import SUITE_CONFIG, build_suite, suite_recipe
from ._model import ImageConfig, ImageError, ImageErrorKind, ImportedImage
from ._oci import (
    HOST_ARCH,
    LAYOUT_TAG,
    check_config,
    manifest_digest,
    read_config,
    sanitize_rootfs,
    unpack,
)
from ._refs import (
    DebianSuite,
    ImageRef,
    RegistryImage,
    parse_image_ref,
    resolve_local_path,
)
from ._registries import RegistryAccess
from ._skopeo import Source, copy, inspect, registry_source
from ._tools import Progress


async def materialize_image(source: FromImage, *, data_dir: Path, id_range: IdRange,
                            progress: Progress,
                            registries: RegistryAccess | None = None) -> ImportedImage:
    """The image ``source`` names, imported (or found in the cache). Raises ImageError.
    ``registries``: those beyond the public internet it may come from (none by default)."""
    try:
        return await _materialize(source, data_dir, id_range, progress,
                                  registries or RegistryAccess())
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise ImageError(f"{source.ref}: disk full while importing it into {data_dir}",
                             ImageErrorKind.DISK_FULL) from exc
        raise ImageError(f"{source.ref}: importing it failed: {exc}") from exc


async def _materialize(source: FromImage, data_dir: Path, id_range: IdRange,
                       progress: Progress, registries: RegistryAccess) -> ImportedImage:
    mirror = os.environ.get("BAC_REGISTRY_MIRROR") or None
    ref = parse_image_ref(source.ref, mirror)
    try:
        return await _imported(ref, source, data_dir, id_range, progress,
                               registries.with_host(mirror))
    except ImageError as exc:
        if exc.kind is not ImageErrorKind.UNREACHABLE or not isinstance(ref, RegistryImage):
            raise
        raise ImageError(f"{exc}{_mirror_hint(ref, source.ref, mirror)}", exc.kind,
                         ref.host) from exc


def _mirror_hint(ref: RegistryImage, written: str, mirror: str | None) -> str:
    """What to do about an unreachable registry, for a Docker Hub name."""
    unmirrored = parse_image_ref(written)
    hub = isinstance(unmirrored, RegistryImage) and unmirrored.host == "docker.io"
    if hub and mirror is not None and ref.host == mirror:
        return " (it is the mirror BAC_REGISTRY_MIRROR names for Docker Hub)"
    if ref.host == "docker.io":
        return (" (a server that cannot reach Docker Hub can pull its names through a mirror:"
                " set BAC_REGISTRY_MIRROR=host:port, see docs/templates.md)")
    return ""


async def _imported(ref: ImageRef, source: FromImage, data_dir: Path, id_range: IdRange,
                    progress: Progress, registries: RegistryAccess) -> ImportedImage:
    if isinstance(ref, RegistryImage):
        # Before anything reaches the registry, the cache's record of its tags included.
        await registries.check(ref, source.ref)
    root = await off_loop(lambda: images_root(data_dir))
    if isinstance(ref, DebianSuite):
        return await _debian(ref, root, id_range, progress)
    async with scratch_dir(root) as scratch:
        if isinstance(ref, RegistryImage):
            src, digest = await _resolve(ref, source, root, scratch, id_range, progress)
        else:
            path = resolve_local_path(ref, data_dir)
            src = Source(ref.skopeo_name(path), source.ref)
            digest = manifest_digest(await inspect(src, scratch), source.ref)
        return await _import(src, digest, root, scratch, id_range, progress,
                             check_first=isinstance(ref, RegistryImage))


async def _resolve(ref: RegistryImage, source: FromImage, root: Path, scratch: Path,
                   id_range: IdRange, progress: Progress) -> tuple[Source, str]:
    """The digest to import and the source pinned to it.

    Without credentials a tag's last digest is remembered: a pinned (@sha256) reference
    is then reused without asking the registry, and a tag still imports from the cache
    while the registry is unreachable. SECURITY: an image pulled with credentials is
    never reused without the registry accepting the requester's own credentials again."""
    username, password = source.username or None, source.password or None
    src = registry_source(ref, source.ref, scratch, username, password)
    anonymous = username is None
    known = recall(root, str(ref)) if anonymous else None
    if known is not None and load(root / entry_name(known, id_range)) is None:
        known = None
    if ref.digest is not None and known is not None:
        return src, known
    try:
        digest = manifest_digest(await inspect(src, scratch), source.ref)
    except ImageError as exc:
        if exc.kind is ImageErrorKind.UNREACHABLE and known is not None:
            progress(f"{exc}; using the image this reference was last resolved to, {known}")
            return src, known
        raise
    if anonymous:
        await off_loop(lambda: remember(root, digest, str(ref),
                                        f"{ref.host}/{ref.repository}@{digest}"))
    return src.pinned(ref, digest), digest


async def _import(src: Source, digest: str, root: Path, scratch: Path, id_range: IdRange,
                  progress: Progress, *, check_first: bool) -> ImportedImage:
    name = entry_name(digest, id_range)

    async def fetch() -> None:
        await _fetch_and_unpack(src, digest, root / name, scratch, id_range, progress,
                                check_first=check_first)

    return await _published(root, name, src.what, digest, fetch, progress)


async def _published(root: Path, name: str, what: str, digest: str,
                     build: Callable[[], Awaitable[None]], progress: Progress) -> ImportedImage:
    """The cached entry ``name``, built first (once, under its lock) if missing."""
    found = load(root / name)
    if found is None:
        async with entry_lock(root, name):
            found = load(root / name)  # another import may have finished meanwhile
            if found is None:
                await build()
                found = load(root / name)
    if found is None:
        raise ImageError(f"{what}: the import of {digest} did not publish an image")
    progress(f"{what}: image {digest} at {found.rootfs}")
    return found


def _metadata(digest: str, what: str, config: ImageConfig, platform: str, id_range: IdRange,
              started: float) -> dict[str, object]:
    return {"digest": digest, "source": what, "config": config.to_json(), "platform": platform,
            "id_base": id_range.base, "id_size": id_range.size, "imported_at": time.time(),
            "import_seconds": round(time.monotonic() - started, 2)}


async def _fetch_and_unpack(src: Source, digest: str, entry: Path, scratch: Path,
                            id_range: IdRange, progress: Progress, *, check_first: bool) -> None:
    started = time.monotonic()
    what = src.what
    if check_first:  # the config is one small blob: refuse a wrong platform before layers
        check_config(await inspect(src, scratch, config=True), what)
    layout, out = scratch / "layout", scratch / "out"
    progress(f"{what}: downloading {digest}")
    await copy(src, layout, LAYOUT_TAG, scratch, progress)
    config, raw_config = await off_loop(lambda: read_config(layout, what))
    out.mkdir(mode=0o700)
    rootfs = out / "rootfs"
    progress(f"{what}: unpacking the layers")
    await unpack(layout, rootfs, id_range.root, progress, what)
    devices, caps = await off_loop(lambda: sanitize_rootfs(rootfs))
    if devices or caps:
        progress(f"{what}: removed {devices} device nodes and {caps} file capabilities")
    progress(f"{what}: shifting ownership to host ids {id_range.base}..")
    try:
        await off_loop(lambda: shift_recorded_ownership(rootfs, id_range.root, id_range.base,
                                                        id_range.size))
    except TemplateBuildError as exc:
        raise ImageError(f"{what}: {exc}") from exc
    os.chmod(rootfs, 0o755)  # noqa: S103 - it is "/" of every sandbox from this image
    platform = f"{raw_config.get('os')}/{raw_config.get('architecture')}"
    meta = _metadata(digest, what, config, platform, id_range, started)
    await off_loop(lambda: publish(out, entry, meta))


async def _debian(ref: DebianSuite, root: Path, id_range: IdRange,
                  progress: Progress) -> ImportedImage:
    recipe = suite_recipe(ref, id_range.base)
    digest = recipe.digest()
    name = entry_name(digest, id_range)

    async def build() -> None:
        started = time.monotonic()
        async with scratch_dir(root) as scratch:
            built = await build_suite(ref, recipe, scratch, id_range.size, progress)
            meta = _metadata(digest, str(ref), SUITE_CONFIG, f"linux/{HOST_ARCH}", id_range,
                             started)
            await off_loop(lambda: publish(built, root / name, meta))

    return await _published(root, name, str(ref), digest, build, progress)
