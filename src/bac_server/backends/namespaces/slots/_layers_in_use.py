"""Which template layers this data directory's slots and checkpoints mount or will mount.

Read from disk only (slot records under ``sandboxes/``, checkpoint metadata under
``checkpoints/``), so it answers for sandboxes another process of the same data directory
made, and without starting the backend. A slot directory with no record yet is skipped:
its record is written right after the directory is made, before anything is mounted, and
the template it is being made from is still referenced by the one who asked for it. A
record that exists but cannot be read fails the whole answer: what it mounts is unknown.
"""

from __future__ import annotations

import json
from pathlib import Path

from bac_server.backends.base import BackendError

from .._config import NamespaceConfig
from ._record import SlotRecord


def layers_in_use(config: NamespaceConfig) -> frozenset[Path]:
    """Blocking; call from a worker thread."""
    found: set[Path] = set()
    for entry in _children(config.sandboxes_dir):
        text = _read(entry / "state.json")
        if text is None:
            continue
        try:
            record = SlotRecord.from_json(text)
        except (ValueError, TypeError, KeyError) as exc:
            raise BackendError(f"slot record {entry / 'state.json'} is unreadable: {exc}") \
                from exc
        found.update(record.layer_stack)
        found.add(Path(record.template_rootfs))
    for entry in _children(config.checkpoints_dir):
        # A checkpoint still being written has no metadata yet; its sandbox's slot
        # record names the same layers meanwhile.
        text = _read(entry / "meta.json")
        if text is None:
            continue
        try:
            meta = json.loads(text)
            found.update(Path(str(p)) for p in meta.get("layers") or ())
            found.add(Path(str(meta["template_rootfs"])))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise BackendError(f"checkpoint metadata {entry / 'meta.json'} is unreadable: "
                               f"{exc}") from exc
    return frozenset(found)


def _children(directory: Path) -> list[Path]:
    try:
        return sorted(directory.iterdir())
    except FileNotFoundError:
        return []


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise BackendError(f"cannot read {path}: {exc}") from exc
