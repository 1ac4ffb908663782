"""OCI images on disk: which manifest is ours, what its config says, and unpacking it.

The layout read here is the private copy skopeo wrote into the import's scratch directory
(always tagged :data:`LAYOUT_TAG`), so only its shape is checked, not its provenance.
Unpacking is umoci's (layer order, whiteouts and opaque directories as the OCI spec says),
rootless as sandbox root's host uid; afterwards the tree is made safe to hand to sandboxes
(:func:`sanitize_rootfs`).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import stat
from pathlib import Path
from typing import Any

from bac_server.cancel_safe import off_loop
from bac_server.host import remove_tree

from ._model import ImageConfig, ImageError, ImageErrorKind
from ._tools import SYSTEM_PATH, Progress, run_tool, tool_error

LAYOUT_TAG = "image"
HOST_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
_INDEX_TYPES = frozenset({"application/vnd.oci.image.index.v1+json",
                          "application/vnd.docker.distribution.manifest.list.v2+json"})
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_BAD = ImageErrorKind.NOT_AN_IMAGE


def _json(raw: bytes, what: str, kind: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ImageError(f"{what}: the {kind} is not JSON", _BAD) from exc
    if not isinstance(data, dict):
        raise ImageError(f"{what}: the {kind} is not a JSON object", _BAD)
    return data


def manifest_digest(raw: bytes, what: str) -> str:
    """The digest of the image to import: the manifest's own, or for a multi-platform
    index the one of its linux/<host arch> entry."""
    data = _json(raw, what, "manifest")
    if data.get("schemaVersion") == 1:
        raise ImageError(f"{what}: Docker schema 1 manifests are not supported; "
                         "push the image again with a current tool", _BAD)
    if data.get("mediaType") not in _INDEX_TYPES and "manifests" not in data:
        return "sha256:" + hashlib.sha256(raw).hexdigest()
    found: list[str] = []
    for entry in data.get("manifests") or []:
        platform_ = entry.get("platform") or {}
        arch, os_name = platform_.get("architecture"), platform_.get("os")
        found.append(f"{os_name}/{arch}")
        if arch == HOST_ARCH and os_name == "linux" and _DIGEST.fullmatch(entry.get("digest", "")):
            return str(entry["digest"])
    raise ImageError(f"{what}: wrong architecture: no linux/{HOST_ARCH} image in it "
                     f"(it has {', '.join(found) or 'none'})", ImageErrorKind.ARCHITECTURE)


def _blob(layout: Path, digest: object, what: str) -> bytes:
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise ImageError(f"{what}: malformed digest {digest!r} in the image", _BAD)
    try:
        return (layout / "blobs" / "sha256" / digest.removeprefix("sha256:")).read_bytes()
    except FileNotFoundError as exc:
        raise ImageError(f"{what}: blob {digest} is missing from the image", _BAD) from exc


def read_config(layout: Path, what: str) -> tuple[ImageConfig, dict[str, Any]]:
    """The image's config (and the raw config object) from a layout skopeo wrote."""
    index = _json((layout / "index.json").read_bytes(), what, "OCI index")
    entries = [m for m in index.get("manifests") or []
               if (m.get("annotations") or {}).get("org.opencontainers.image.ref.name")
               == LAYOUT_TAG]
    if len(entries) != 1:
        raise ImageError(f"{what}: the copied layout holds {len(entries)} images, not one",
                         _BAD)
    manifest = _json(_blob(layout, entries[0].get("digest"), what), what, "manifest")
    config = _json(_blob(layout, (manifest.get("config") or {}).get("digest"), what),
                   what, "image config")
    return image_config(config, what), config


def check_config(raw: bytes, what: str) -> ImageConfig:
    """Parse a raw config blob and check its platform."""
    return image_config(_json(raw, what, "image config"), what)


def image_config(config: dict[str, Any], what: str) -> ImageConfig:
    """Check the platform and read Env, User, WorkingDir, Entrypoint and Cmd."""
    os_name, arch = config.get("os"), config.get("architecture")
    if os_name != "linux" or arch != HOST_ARCH:
        raise ImageError(f"{what}: wrong architecture: the image is for {os_name}/{arch}, "
                         f"this server runs linux/{HOST_ARCH} images only",
                         ImageErrorKind.ARCHITECTURE)
    body = config.get("config") or {}
    env = tuple((k, v) for k, _, v in (str(e).partition("=") for e in body.get("Env") or [])
                if k)
    argv = [str(a) for a in (body.get("Entrypoint") or []) + (body.get("Cmd") or [])]
    return ImageConfig(env=env, user=body.get("User") or None,
                       workdir=body.get("WorkingDir") or None, cmd=tuple(argv) or None)


async def unpack(layout: Path, rootfs: Path, unpacker: int, progress: Progress,
                 what: str) -> None:
    """Apply the layers in order into ``rootfs`` (which must not exist yet), as the
    unprivileged uid ``unpacker``: every inode comes out owned by it, the image's owners
    recorded in ``user.rootlesscontainers`` xattrs (``_idshift.shift_recorded_ownership``),
    device nodes as empty files, file capabilities dropped."""
    if unpacker < 1:
        raise ValueError(f"images are never unpacked as uid {unpacker}")
    await off_loop(lambda: _give_tree(layout, unpacker))
    work = rootfs.parent / ".unpack"
    work.mkdir(mode=0o700)
    os.chown(work, unpacker, unpacker)
    layout_fd = os.open(layout, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        work_fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            # The tool reaches both through its own fds: no path of the server's private
            # directories needs to be open to the unpacking uid.
            at = f"/proc/self/fd/{work_fd}"
            env = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "HOME": at, "TMPDIR": at}
            # SECURITY: umoci reads the tenant's layers as ``unpacker`` (sandbox root's
            # host uid, no groups, no capabilities): whatever a layer names, it can write
            # only where that uid may, never a file of host root's.
            result = await run_tool(
                ["umoci", "--log", "warn", "raw", "unpack", "--rootless", "--image",
                 f"/proc/self/fd/{layout_fd}:{LAYOUT_TAG}", f"{at}/rootfs"], env, progress,
                as_uid=unpacker, pass_fds=(layout_fd, work_fd))
        finally:
            os.close(work_fd)
    finally:
        os.close(layout_fd)
    if result.code != 0:
        raise tool_error(what, "unpacking the layers", result)
    os.rename(work / "rootfs", rootfs)
    await off_loop(lambda: remove_tree(work))


def _give_tree(layout: Path, uid: int) -> None:
    """Hand the layout skopeo wrote (index, blobs named by digest) to ``uid`` to read."""
    for dirpath, dirnames, filenames in os.walk(layout, followlinks=False):
        for name in (".", *dirnames, *filenames):
            # SECURITY: the server's private copy of an image, made by skopeo here; its
            # links are not followed and its owner becomes the unprivileged unpacker.
            os.lchown(os.path.join(dirpath, name), uid, uid)


def sanitize_rootfs(rootfs: Path) -> tuple[int, int]:
    """Remove device nodes and file capabilities; returns how many of each.

    A device node would give whoever owns it in a sandbox the host device behind it, and
    a file capability's embedded root id cannot be shifted (chown would drop it anyway):
    both are removed rather than trusted. Sandboxes get /dev from the runtime."""
    devices = caps = 0
    for dirpath, dirnames, filenames in os.walk(rootfs, followlinks=False):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                # SECURITY: no host device reachable through an image.
                os.unlink(path)
                devices += 1
                continue
            if stat.S_ISLNK(mode):
                continue
            if "security.capability" in os.listxattr(path, follow_symlinks=False):
                os.removexattr(path, "security.capability", follow_symlinks=False)
                caps += 1
    return devices, caps
