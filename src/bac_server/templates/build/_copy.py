"""COPY: the uploaded files are unpacked unprivileged, copied into the image in the sandbox.

The upload for a COPY is a tar (or tar.gz) of the files matching ``src``, named relative to
the build context, as E2B's SDK makes it (``tar_file_stream``). It is unpacked by a child
running as sandbox root's host uid, every entry made under the target's fd with
``openat2`` confined to the tree (``context._unpack``: no absolute names, no ``..``, no
hard links, devices or FIFOs, links only to inside the tree and never passed through, no
setuid bits). Which entries ``src`` matches is decided on that tree from its fd, no link
of it followed (``context._glob``); everything about the image (its symlinks, an existing
directory at ``dest``, the owner's uid) is resolved by ``cp``/``chown`` in the build
sandbox, where the tree is bound read-only: a link in the upload or the image can never
make the host read or write outside the tree or the layer.

Docker semantics: a directory source copies its contents; ``dest`` ending in ``/``, an
existing directory, or several sources mean "into this directory"; missing parents are
made; ``--chown``/``--chmod`` apply to what was copied (and to ``dest`` when it was made).
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from .._errors import DiskFullError, TemplateBuildError
from .context import DEFAULT_LIMITS, Limits, ThroughLink, entry_exists, glob_context, unpack_upload

CONTEXT_MOUNT = "/.bac-copy"  # where the unpacked files appear in the build sandbox
_GLOB_CHARS = frozenset("*?[")


async def unpack(archive: Path, into: Path, owner: int, src: str,
                 limits: Limits = DEFAULT_LIMITS) -> None:
    """Unpack the upload of ``COPY src`` into ``into`` (made here), owned by ``owner``
    (sandbox root's host uid, never 0: the unpacking runs as that uid)."""
    try:
        outcome = await unpack_upload(archive, into, owner, limits)
    except FileNotFoundError as exc:
        raise TemplateBuildError(f"COPY {src}: its files were not uploaded ({exc.filename})"
                                 ) from exc
    if outcome.kind == "ok":
        return
    if outcome.kind == "refused":
        raise TemplateBuildError(f"COPY {src}: the uploaded files were refused: "
                                 f"{outcome.message}")
    if outcome.kind == "not-a-tar":
        raise TemplateBuildError(f"COPY {src}: the upload is not a tar archive "
                                 f"({outcome.message})")
    if outcome.kind == "disk-full":
        raise DiskFullError(f"COPY {src}: no space left on the device holding "
                            f"{into.parent} while unpacking its files ({outcome.message})")
    raise TemplateBuildError(f"COPY {src}: unpacking the uploaded files failed: "
                             f"{outcome.message}")


def match(context: Path, src: str) -> list[str]:
    """The entries ``src`` names in the unpacked tree, relative to it; raises naming
    ``src`` when there is none, or when its path goes through a link of the tree."""
    pattern = posixpath.normpath(src.strip()).lstrip("/")
    if pattern.startswith("../") or pattern == "..":
        raise TemplateBuildError(f"COPY {src}: the source must be inside the build context")
    root_fd = os.open(context, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if _GLOB_CHARS.isdisjoint(pattern):
            found = [pattern] if entry_exists(root_fd, pattern) else []
        else:
            found = glob_context(root_fd, pattern)
    except ThroughLink as link:
        raise TemplateBuildError(
            f"COPY {src}: {link.args[0]} is a symbolic link in the build context; a source "
            "is never looked up through one (name the path it points to)") from link
    finally:
        os.close(root_fd)
    if not found:
        raise TemplateBuildError(f"COPY {src}: no such file or directory in the build "
                                 f"context: {src}")
    return found


def destination(dest: str, cwd: str) -> str:
    """``dest`` made absolute against the working directory; a trailing '/' is kept."""
    if not dest:
        raise TemplateBuildError("COPY: the destination is empty")
    joined = posixpath.join(cwd, dest)
    normal = posixpath.normpath(joined)
    return normal + "/" if joined.endswith("/") and normal != "/" else normal


# Run as root in the build sandbox: sh -c SCRIPT sh <ctx> <dest> <owner> <mode> <src>...
SCRIPT = r"""
set -eu
ctx=$1 dest=$2 owner=$3 mode=$4
shift 4
if [ -n "$owner" ]; then
    case "$owner" in *:*) ;; *) owner="$owner:$(id -g "${owner}")" ;; esac
fi
one() {
    [ -z "$owner" ] || chown -h "$owner" "$1"
    [ -z "$mode" ] || [ -L "$1" ] || chmod "$mode" "$1"
}
all() {
    [ -z "$owner" ] || chown -h -R "$owner" "$1"
    [ -z "$mode" ] || [ -L "$1" ] || chmod -R "$mode" "$1"
}
into=0
case "$dest" in */) into=1 ;; esac
[ $# -le 1 ] || into=1
for rel in "$@"; do
    src="$ctx/$rel"
    if [ -d "$src" ] && [ ! -L "$src" ]; then
        target=${dest%/}
        [ -n "$target" ] || target=/
        made=0
        [ -e "$target" ] || { mkdir -p "$target"; made=1; }
        cp -a "$src/." "$target/"
        for path in "$src"/* "$src"/.[!.]* "$src"/..?*; do
            [ -e "$path" ] || [ -L "$path" ] || continue
            all "$target/${path##*/}"
        done
        [ $made = 0 ] || one "$target"
    else
        if [ $into = 1 ] || [ -d "$dest" ]; then
            mkdir -p "$dest"
            target="${dest%/}/${rel##*/}"
        else
            mkdir -p "$(dirname "$dest")"
            target=$dest
        fi
        if [ -L "$target" ] || { [ -e "$target" ] && [ ! -d "$target" ]; }; then
            rm -f "$target"
        fi
        cp -a "$src" "$target"
        all "$target"
    fi
done
"""


def copy_argv(dest: str, owner: str | None, mode: int | None,
              sources: list[str]) -> tuple[str, ...]:
    mode_text = "" if mode is None else format(mode, "o")
    return ("/bin/sh", "-c", SCRIPT, "sh", CONTEXT_MOUNT, dest, owner or "", mode_text,
            *sources)
