"""Looking a path up in a stack of overlay layers from the host, without mounting them.

The answer is what a sandbox on those layers would see: the topmost layer holding the
path wins, unless a layer above hides it with a *whiteout* (a character device 0:0 at the
path or at one of its parents), a non-directory at one of its parents, or an *opaque*
parent directory (``trusted.overlay.opaque=y``: nothing below that directory in lower
layers shows through). Symbolic links are not followed: the caller decides what a link
means inside the sandbox.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

_OPAQUE = "trusted.overlay.opaque"


def is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _is_opaque(path: Path) -> bool:
    try:
        return os.getxattr(path, _OPAQUE, follow_symlinks=False) == b"y"
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.ENOTSUP):
            return False
        raise


def find_in_layers(layers: Sequence[Path], relative: str) -> Path | None:
    """The host path of ``relative`` (e.g. ``usr/bin/python3``) in the topmost layer that
    shows it, or None when no layer does or it is hidden."""
    parts = PurePosixPath(relative.lstrip("/")).parts
    if not parts or ".." in parts:
        raise ValueError(f"not a path inside a rootfs: {relative!r}")
    for layer in layers:
        current = layer
        for depth, part in enumerate(parts):
            current = current / part
            try:
                found = os.lstat(current)
            except (FileNotFoundError, NotADirectoryError):
                break  # not in this layer: look below, unless a parent was opaque
            if is_whiteout(found):
                return None
            if depth == len(parts) - 1:
                return current
            if not stat.S_ISDIR(found.st_mode):
                return None  # a file (or link) here replaces the directory below
            if _is_opaque(current):
                # Nothing below this directory shows through from lower layers.
                return _rest_in(current, parts[depth + 1:])
    return None


def _rest_in(directory: Path, rest: tuple[str, ...]) -> Path | None:
    """``rest`` inside an opaque directory of one layer (lower layers do not count)."""
    current = directory
    for depth, part in enumerate(rest):
        current = current / part
        try:
            found = os.lstat(current)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if is_whiteout(found) or (depth < len(rest) - 1 and not stat.S_ISDIR(found.st_mode)):
            return None
    return current
