"""When each unreferenced entry was first seen unreferenced: its quarantine.

A collection deletes an entry only once successive collections have found it
unreferenced for the whole grace period. That covers every moment an entry is needed
before anything durable names it: a layer published by a build that has not written its
manifest yet, a manifest written by a build not yet marked ready, a template resolved by a
sandbox create just before its template was deleted and before the sandbox's slot names
its layers. ``<root>/templates/.gc-marks.json`` maps ``"<kind> <name>"`` to the wall-clock
time it was first seen unreferenced; an entry seen referenced again loses its mark. A lost
or damaged file only restarts every quarantine (nothing is deleted early).
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

MARKS = ".gc-marks.json"


def marks_path(root: Path) -> Path:
    return root / "templates" / MARKS


def load_marks(root: Path) -> dict[str, float]:
    try:
        raw = json.loads(marks_path(root).read_text())
        return {str(k): float(v) for k, v in raw.items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def save_marks(root: Path, marks: dict[str, float]) -> None:
    """Atomically (temp file, rename)."""
    target = marks_path(root)
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        temp.write_text(json.dumps(marks, indent=0, sort_keys=True))
        os.rename(temp, target)
    finally:
        temp.unlink(missing_ok=True)
