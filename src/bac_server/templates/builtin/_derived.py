"""The built-in templates derived from another one (``LAYERS``: a :class:`LayerRecipe`
each), found by name or alias, and built atomically.

The parent's published rootfs is copied (``cp -a --reflink=auto``: a clone on filesystems
that share extents, a plain copy on ext4; ~1 s for ``base``), brought back to container
ids, and the recipe's steps run in it with ``chroot`` inside a private mount namespace,
the way mmdebstrap builds ``base`` on the host: apt packages, pip packages into the
system Python, npm packages with the host's npm. The tree is then shifted to the sandbox
id range again and published by one rename, like every template.

Downloads are cached under ``<data_dir>/cache/{apt,pip,npm}`` (bind-mounted into the
chroot, so nothing of them ends up in the template): a rebuild after a recipe change
fetches only what changed.

The start command is written to ``/etc/bac/start.json`` in the template, where envd finds
it at boot and hands it to its supervisor (``bac_envd._supervisor``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

from bac_server.host import remove_tree

from .._errors import TemplateBuildError
from .._idshift import shift_ownership
from ._base_full import BASE_FULL
from ._code_interpreter import CODE_INTERPRETER, LayerRecipe
from ._desktop import DESKTOP
from ._rootfs import METADATA_FILE, ProgressCallback, run_step

LAYERS: tuple[LayerRecipe, ...] = (CODE_INTERPRETER, DESKTOP, BASE_FULL)
# Bump when the layer builder changes what it produces from the same recipe.
LAYER_BUILDER_VERSION = 1
START_FILE = "etc/bac/start.json"
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def find_layer(ref: str) -> LayerRecipe | None:
    """The layer recipe named ``ref`` or aliased so, if any."""
    return next((r for r in LAYERS if ref == r.name or ref in r.aliases), None)


def layer_digest(recipe: LayerRecipe, parent_digest: str, id_base: int) -> str:
    fields = dataclasses.asdict(recipe)
    if not fields["files"]:
        # Added after code-interpreter was built: left out while empty, so its builds
        # keep their names.
        del fields["files"]
    del fields["warm_up"]  # run in a started sandbox, not part of what is built
    del fields["memory_mb"]  # its sandboxes' default, not part of what is built
    blob = json.dumps([fields, parent_digest, id_base,
                       LAYER_BUILDER_VERSION], sort_keys=True, default=bytes.hex).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def start_config(recipe: LayerRecipe) -> dict[str, object]:
    """What envd's supervisor reads from ``/etc/bac/start.json`` (a recipe with a
    service only)."""
    start = recipe.start
    assert start is not None
    return {"argv": list(start.argv), "user": start.user, "cwd": start.cwd,
            "env": dict(start.env), "ready_line": start.ready_line.decode(),
            "restart": start.restart_on_exit}


def _chroot_script(recipe: LayerRecipe) -> str:
    """Shell run in a private mount namespace; $1 rootfs, $2 apt, $3 pip cache dirs."""
    apt = "chroot \"$R\" env DEBIAN_FRONTEND=noninteractive apt-get -q -y"
    lines = [
        "set -eu", 'R=$1',
        'mount -t proc proc "$R/proc"', 'mount --bind /dev "$R/dev"',
        # SECURITY: only the build's own private namespace sees the host's resolver; the
        # template keeps its "no resolver" file underneath.
        'mount --bind /etc/resolv.conf "$R/etc/resolv.conf"',
        # The host's CA store, for hosts whose traffic passes a TLS-inspecting proxy.
        'mount --bind /etc/ssl/certs "$R/etc/ssl/certs"',
        'mount --bind "$2" "$R/var/cache/apt/archives"',
        'mkdir -p "$R/var/cache/bac-pip"', 'mount --bind "$3" "$R/var/cache/bac-pip"',
    ]
    if recipe.debian_packages:
        packages = " ".join(shlex.quote(p) for p in recipe.debian_packages)
        # Debian's minbase drops man pages, and the JDK's postinst fails registering its
        # man page alternatives without this directory (Debian bug #863199).
        lines += ['mkdir -p "$R/usr/share/man/man1"']
        lines += ["echo '>>> apt-get update'", f"{apt} update",
                  "echo " + shlex.quote(f">>> apt-get install {packages}"),
                  f"{apt} --no-install-recommends -o APT::Keep-Downloaded-Packages=true "
                  f"install {packages}"]
    if recipe.pypi_packages:
        packages = " ".join(shlex.quote(p) for p in recipe.pypi_packages)
        lines += ["echo " + shlex.quote(f">>> pip install {' '.join(recipe.pypi_packages)}"),
                  'chroot "$R" env HOME=/root python3 -m pip install -q --break-system-packages '
                  "--disable-pip-version-check --no-warn-script-location --root-user-action=ignore "
                  f"--cache-dir /var/cache/bac-pip {packages}"]
    # No `apt-get clean`: the archives directory is the bind-mounted download cache.
    lines.append('rm -rf "$R"/var/lib/apt/lists/*')
    return "\n".join(lines)


def _post_install_script(recipe: LayerRecipe) -> str:
    """Shell run after ``files`` are written; $1 rootfs."""
    lines = ["set -eu", 'R=$1', 'mount -t proc proc "$R/proc"', 'mount --bind /dev "$R/dev"']
    for argv in recipe.post_install:
        lines.append('chroot "$R" ' + " ".join(shlex.quote(a) for a in argv))
    return "\n".join(lines)


async def _npm_install(rootfs: Path, recipe: LayerRecipe, cache: Path,
                       progress: ProgressCallback) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise TemplateBuildError(
            f"template {recipe.name} needs npm on the host for {recipe.npm_global_packages}")
    progress(f">>> npm install -g {' '.join(recipe.npm_global_packages)}")
    await run_step([npm, "install", "--global", "--prefix", str(rootfs / "usr/local"),
                    "--cache", str(cache), "--no-audit", "--no-fund", "--loglevel=warn",
                    *recipe.npm_global_packages], progress, "npm install")


def _copy_parent(parent_rootfs: Path, rootfs: Path) -> None:
    done = subprocess.run(["cp", "-a", "--reflink=auto", str(parent_rootfs), str(rootfs)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise TemplateBuildError(f"copying {parent_rootfs} failed: {done.stderr.strip()}")


def _cache_dirs(cache_root: Path) -> tuple[Path, Path, Path]:
    dirs = (cache_root / "apt", cache_root / "pip", cache_root / "npm")
    for path in dirs:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    (dirs[0] / "partial").mkdir(exist_ok=True)
    return dirs


def _write_files(rootfs: Path, recipe: LayerRecipe) -> None:
    for name, text, mode in recipe.files:
        relative = Path(name.lstrip("/"))
        if not name.startswith("/") or ".." in relative.parts:
            raise TemplateBuildError(f"template {recipe.name}: bad file path {name!r}")
        path = rootfs / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.chmod(path, mode)


def _write_start(rootfs: Path, recipe: LayerRecipe) -> None:
    if recipe.start is None:
        return
    path = rootfs / START_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(start_config(recipe), indent=2) + "\n")
    os.chmod(path, 0o644)


async def build_layer(recipe: LayerRecipe, digest: str, parent_rootfs: Path, parent: Path,
                      *, cache_root: Path, id_base: int, id_size: int,
                      progress: ProgressCallback) -> Path:
    """Build ``recipe`` on ``parent_rootfs`` into ``parent/<digest>``; return that dir."""
    final = parent / digest
    for stale in await asyncio.to_thread(lambda: list(parent.glob(".build-*"))):
        progress(f"removing an interrupted build: {stale.name}")
        await asyncio.to_thread(remove_tree, stale)
    work = parent / f".build-{digest}-{os.getpid()}"
    work.mkdir(mode=0o700, parents=True)
    rootfs = work / "rootfs"
    started = time.monotonic()
    try:
        progress(f"building template {recipe.name} on {recipe.parent}: copying its rootfs")
        await asyncio.to_thread(_copy_parent, parent_rootfs, rootfs)
        await asyncio.to_thread(shift_ownership, rootfs, 0, id_size, from_base=id_base)
        apt_cache, pip_cache, npm_cache = await asyncio.to_thread(_cache_dirs, cache_root)
        await run_step(["unshare", "--mount", "--propagation", "private", "--fork",
                        "sh", "-c", _chroot_script(recipe), "sh", str(rootfs), str(apt_cache),
                        str(pip_cache)], progress, f"template {recipe.name} packages",
                       env={"PATH": _SYSTEM_PATH, "LANG": "C.UTF-8"})
        (rootfs / "var/cache/bac-pip").rmdir()
        if recipe.npm_global_packages:
            await _npm_install(rootfs, recipe, npm_cache, progress)
        await asyncio.to_thread(_write_files, rootfs, recipe)
        if recipe.post_install:
            await run_step(["unshare", "--mount", "--propagation", "private", "--fork",
                            "sh", "-c", _post_install_script(recipe), "sh", str(rootfs)],
                           progress, f"template {recipe.name} post-install",
                           env={"PATH": _SYSTEM_PATH, "LANG": "C.UTF-8"})
        await asyncio.to_thread(_write_start, rootfs, recipe)
        progress(f"shifting ownership to host ids {id_base}..")
        count = await asyncio.to_thread(shift_ownership, rootfs, id_base, id_size)
        os.chmod(rootfs, 0o755)  # noqa: S103 - it is "/" of every sandbox
        meta = {"recipe": {"name": recipe.name, "parent": recipe.parent, "id_base": id_base},
                "layer": json.loads(json.dumps(recipe.__dict__, default=_plain)),
                "digest": digest, "inodes": count, "built_at": time.time(),
                "build_seconds": round(time.monotonic() - started, 1)}
        (work / METADATA_FILE).write_text(json.dumps(meta, indent=2))
        os.rename(work, final)
    except BaseException:
        await asyncio.to_thread(remove_tree, work)
        raise
    progress(f"template {recipe.name} ready in {time.monotonic() - started:.1f}s: {final}")
    return final


def _plain(value: object) -> object:
    if isinstance(value, bytes):
        return value.decode()
    return getattr(value, "__dict__", str(value))
