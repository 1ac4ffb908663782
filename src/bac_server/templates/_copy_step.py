"""COPY: the uploaded files are unpacked on the host, copied into the image in the sandbox.

The upload for a COPY is a tar (or tar.gz) of the files matching ``src``, named relative to
the build context, as E2B's SDK makes it (``tar_file_stream``). It is unpacked on the host
with tarfile's ``data`` filter (no absolute paths, no ``..``, no links leading out, no
devices or FIFOs, no setuid bits), every file owned by sandbox root. Which entries ``src``
matches is decided on that private tree; everything about the image (its symlinks, an
existing directory at ``dest``, the owner's uid) is resolved by ``cp``/``chown`` in the
build sandbox, where the tree is bound read-only: a link in the image can never make the
host write outside the layer.

Docker semantics: a directory source copies its contents; ``dest`` ending in ``/``, an
existing directory, or several sources mean "into this directory"; missing parents are
made; ``--chown``/``--chmod`` apply to what was copied (and to ``dest`` when it was made).
"""

from __future__ import annotations

import errno
import os
import posixpath
import tarfile
import zlib
from pathlib import Path

from ._context_glob import glob_context
from ._errors import TemplateBuildError

CONTEXT_MOUNT = "/.bac-copy"  # where the unpacked files appear in the build sandbox
_GLOB_CHARS = frozenset("*?[")


class DiskFullError(TemplateBuildError):
    """The disk holding the data directory filled up during the build."""


def unpack(archive: Path, into: Path, owner: int, src: str) -> None:
    """Unpack the upload of ``COPY src`` into ``into`` (made here), owned by ``owner``."""

    def keep(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
        if member.name.startswith("/"):
            # Stricter than the data filter, which strips the slash: no client sends these.
            raise tarfile.AbsolutePathError(member)
        checked = tarfile.data_filter(member, dest)
        # Owned by sandbox root whoever packed it: the build sandbox can read it all.
        return checked.replace(uid=owner, gid=owner, uname="", gname="", deep=False)

    into.mkdir(mode=0o700)
    try:
        with tarfile.open(archive, "r:*") as tar:
            tar.extractall(into, filter=keep)  # noqa: S202 - the data filter, and stricter
    except tarfile.FilterError as exc:
        raise TemplateBuildError(f"COPY {src}: the uploaded files were refused: {exc}") from exc
    except FileNotFoundError as exc:
        raise TemplateBuildError(f"COPY {src}: its files were not uploaded ({exc.filename})"
                                 ) from exc
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise TemplateBuildError(f"COPY {src}: the upload is not a tar archive ({exc})") from exc
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise DiskFullError(f"COPY {src}: no space left on the device holding "
                                f"{into.parent} while unpacking its files") from exc
        raise
    _own(into, owner)


def _own(root: Path, owner: int) -> None:
    """Give the tree to sandbox root: the directories tarfile made for names without an
    entry of their own belong to host root, which the sandbox cannot enter (the tree's
    root is what the sandbox sees of the bind)."""
    os.chmod(root, 0o755)  # noqa: S103 - bound read-only into the build sandbox only
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (".", *dirnames, *filenames):
            # SECURITY: a private tree just unpacked by the server (no links leading out,
            # none followed here): ownership moves to the sandbox id range only.
            os.lchown(os.path.join(dirpath, name), owner, owner)


def match(context: Path, src: str) -> list[str]:
    """The entries ``src`` names in the unpacked tree, relative to it; raises naming
    ``src`` when there is none."""
    pattern = posixpath.normpath(src.strip()).lstrip("/")
    if pattern.startswith("../") or pattern == "..":
        raise TemplateBuildError(f"COPY {src}: the source must be inside the build context")
    if _GLOB_CHARS.isdisjoint(pattern):
        found = [pattern] if os.path.lexists(context / pattern) else []
    else:
        found = glob_context(context, pattern)
    if not found:
        raise TemplateBuildError(f"COPY {src}: no such file or directory in the build "
                                 f"context: {src}")
    top = os.path.realpath(context)
    for entry in found:
        parent = os.path.realpath(os.path.dirname(context / entry))
        if os.path.commonpath([top, parent]) != top:
            raise TemplateBuildError(f"COPY {src}: {entry} leads outside the build context")
    return ["." if entry == "." else entry for entry in found]


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
