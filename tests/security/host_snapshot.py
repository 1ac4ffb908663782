"""What a directory tree holds, to prove an attempt changed nothing outside its target;
holds no tests."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

Snapshot = dict[str, tuple[int, int, int, str]]


def snapshot(top: Path, skip: Path | None = None) -> Snapshot:
    """Every entry under ``top`` (``skip``'s subtree left out): mode, owner, group, and the
    content's digest (a link's target)."""
    found: Snapshot = {}
    for dirpath, dirnames, filenames in os.walk(top):
        if skip is not None:
            dirnames[:] = [d for d in dirnames if Path(dirpath, d) != skip]
        for name in (".", *dirnames, *filenames):
            path = os.path.join(dirpath, name)
            info = os.lstat(path)
            if stat.S_ISREG(info.st_mode):
                with open(path, "rb") as file:
                    content = hashlib.sha256(file.read()).hexdigest()
            elif stat.S_ISLNK(info.st_mode):
                content = os.readlink(path)
            else:
                content = ""
            found[os.path.relpath(path, top)] = (info.st_mode, info.st_uid, info.st_gid, content)
    return found


def make_victims(top: Path) -> tuple[Path, Path]:
    """Under ``top``: a root-owned 0755 directory holding a root-owned 0600 file."""
    outside = top / "outside"
    outside.mkdir(mode=0o755)
    os.chmod(outside, 0o755)
    secret = outside / "secret"
    secret.write_text("root's secret\n")
    os.chmod(secret, 0o600)
    os.chown(outside, 0, 0)
    os.chown(secret, 0, 0)
    return outside, secret
