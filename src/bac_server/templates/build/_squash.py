"""Keep overlay stacks shallow: merge a template's oldest layers into one rootfs.

Every layer is one more directory each lookup may walk through, and the stack is mounted
for each build step and each sandbox. When a chain grows past ``MAX_DEPTH`` layers the
rootfs and all but the newest ``KEEP`` layers are merged: a read-only overlay of them is
mounted in a private mount namespace (so nothing is left mounted on the host whatever
happens) and copied (``cp -a``, ownership, modes and xattrs kept) into a new layer that
is a whole rootfs. Whiteouts and opaque directories are resolved by the overlay itself.
The merge is cached like any layer, under a key naming exactly what it merged, so a
rebuild (or another template on the same chain) reuses it.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from bac_server.cancel_safe import end_child

from .._errors import TemplateBuildError
from ..layers import LayerWork, digest
from ._runner import StepRunner

MAX_DEPTH = 60
KEEP = 30
_SCRIPT = r"""
set -eu
cd "$1"
mkdir "$2" "$3"
mount -t overlay overlay -o "ro,lowerdir=$4" "$2"
cp -a --reflink=auto "$2/." "$3/"
"""


async def squash(runner: StepRunner, step: str, rootfs: Path, layers: list[Path],
                 keep: int) -> tuple[Path, list[Path]]:
    """Merge ``rootfs`` and ``layers`` (bottom first) but the newest ``keep`` into one
    rootfs; returns it and the layers left above it."""
    merged, kept = layers[:len(layers) - keep], layers[len(layers) - keep:]
    key = digest("squash", str(rootfs), [str(p) for p in merged])
    runner.say(step, f"squashing the base and {len(merged)} layers into one "
                     f"({len(layers)} layers were stacked on it)")

    async def make(work: LayerWork) -> dict[str, str]:
        await _merge(work, rootfs, merged)
        return {"squashed": str(len(merged) + 1)}

    info, _ = await runner.layer(key, "squash", make)
    return runner.layers.diff(info.key), kept


async def _merge(work: LayerWork, rootfs: Path, merged: list[Path]) -> None:
    base = work.path.parent.parent
    stack = await asyncio.to_thread(_lower_option, base, [*reversed(merged), rootfs])
    mountpoint = work.scratch / "merged"
    await asyncio.to_thread(work.scratch.mkdir, 0o700)
    proc = await asyncio.create_subprocess_exec(
        # SECURITY: the overlay is mounted read-only in a private mount namespace of this
        # child only; it disappears with the child, and the copy goes to a private dir.
        "unshare", "--mount", "--propagation", "private", "sh", "-c", _SCRIPT, "sh",
        str(base), str(mountpoint), str(work.upper), stack,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        out, _ = await proc.communicate()
    except BaseException:
        await end_child(proc)  # its mount namespace, and the overlay in it, end with it
        raise
    if proc.returncode != 0:
        raise TemplateBuildError(f"squashing layers failed (exit {proc.returncode}): "
                                 f"{out.decode(errors='replace').strip()[-2000:]}")
    os.chmod(work.upper, 0o755)  # noqa: S103 - it becomes "/" of sandboxes
    mountpoint.rmdir()


def _lower_option(base: Path, stack: list[Path]) -> str:
    """The ``lowerdir`` value; paths relative to ``base`` keep it within one page."""
    parts = [os.path.relpath(p, base) for p in stack]
    if any(c in part for part in parts for c in ",:\\"):
        raise TemplateBuildError(f"cannot squash: a layer path has ',', ':' or '\\': {parts}")
    return ":".join(parts)
