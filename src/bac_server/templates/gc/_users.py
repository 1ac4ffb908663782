"""Which data directories use a template root, so that only its sole user collects it.

Several servers may share one template root (``BAC_TEMPLATES_DIR``: test servers, several
servers on one host). Each keeps its builds, tags and sandbox pins in its own store, and
its sandboxes and checkpoints in its own data directory, so none of them can tell what
the others still need. Every server therefore registers its data directory in the root
it uses, and a collection deletes template storage only when no other registered data
directory still exists::

    <root>/templates/users/<sha256(data dir)[:32]>.json   {"data_dir": "/path"}

A registration whose data directory is gone is dropped. One that stays (a server stopped
for good without removing its data directory) blocks collection of that root: fail
closed. Remove the file (the collection report names it) to let collection proceed.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path

USERS = "users"


def users_dir(root: Path) -> Path:
    return root / "templates" / USERS


def _file(root: Path, data_dir: Path) -> Path:
    name = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:32]
    return users_dir(root) / f"{name}.json"


def register_user(root: Path, data_dir: Path) -> None:
    """Note that ``data_dir`` uses the template root ``root`` (idempotent, atomic)."""
    target = _file(root, data_dir)
    if target.is_file():
        return
    target.parent.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    target.parent.mkdir(mode=0o700, exist_ok=True)
    temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        temp.write_text(json.dumps({"data_dir": str(data_dir.resolve())}))
        os.rename(temp, target)
    finally:
        temp.unlink(missing_ok=True)


def other_users(root: Path, data_dir: Path, *, forget_gone: bool) -> list[Path]:
    """The registration files of data directories other than ``data_dir`` that still
    exist. ``forget_gone``: delete those whose data directory is gone. An unreadable
    registration counts as a user (its owner is unknown)."""
    mine = _file(root, data_dir)
    others: list[Path] = []
    folder = users_dir(root)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path == mine:
            continue
        try:
            named = Path(str(json.loads(path.read_text())["data_dir"]))
        except (OSError, ValueError, KeyError, TypeError):
            others.append(path)
            continue
        if named.is_dir():
            others.append(path)
        elif forget_gone:
            path.unlink(missing_ok=True)
    return others


def user_dir_of(registration: Path) -> str:
    """The data directory a registration names, for reports."""
    try:
        return str(json.loads(registration.read_text())["data_dir"])
    except (OSError, ValueError, KeyError, TypeError):
        return f"(unreadable: {registration})"
