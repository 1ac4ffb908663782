"""Start snapshots on disk: which checkpoint holds the started state of which built template.

``<data_dir>/start-snapshots/<template id>.<digest>.json`` (0600; the directory 0700)::

    {"template_id": ..., "digest": ..., "checkpoint_id": ..., "token": ...,
     "size_bytes": N, "created_at": <unix s>, "took_s": 1.2, "complete": true}

Keyed by the template *and* its manifest digest: an identical rebuild of the same template
(same digest) finds its snapshot again, while two templates that happen to share a digest
(two teams' identical recipes) never share one — a snapshot holds the memory of the
service it started, secrets it generated at start included.

A record is written ``complete: false`` before its checkpoint is taken and rewritten
complete after, so a crash in between leaves a record naming the checkpoint to delete,
never a checkpoint nobody knows about. ``token`` is the envd token in force when the
checkpoint was taken (what the backend presents to re-initialise a copy).
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger(__name__)
_PART = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")  # ids, digests, built-in names
_SUFFIX = ".json"


@dataclass(frozen=True)
class StartSnapshot:
    template_id: str
    digest: str
    checkpoint_id: str
    token: str
    size_bytes: int = 0
    created_at: float = 0.0
    took_s: float = 0.0  # from the internal sandbox's create to the checkpoint on disk
    complete: bool = False


def _name(template_id: str, digest: str) -> str:
    # SECURITY: both parts become a file name; only [a-z0-9-] keeps them inside the directory.
    if not (_PART.match(template_id) and _PART.match(digest)):
        raise ValueError(f"not a template id and digest: {template_id!r}, {digest!r}")
    return f"{template_id}.{digest}{_SUFFIX}"


class SnapshotRecords:
    """The records under one directory. Blocking: callers run these in a thread."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, snapshot: StartSnapshot) -> None:
        """Atomically (temp file, fsync, rename)."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        target = self.root / _name(snapshot.template_id, snapshot.digest)
        temp = self.root / f".{target.name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(asdict(snapshot), handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.rename(temp, target)
        finally:
            temp.unlink(missing_ok=True)

    def remove(self, template_id: str, digest: str) -> None:
        (self.root / _name(template_id, digest)).unlink(missing_ok=True)

    def load(self) -> list[StartSnapshot]:
        """Every readable record. A damaged one is logged and left in place (its checkpoint
        cannot be named, so nothing is deleted on its account); its template boots."""
        if not self.root.is_dir():
            return []
        found = []
        for path in sorted(self.root.iterdir()):
            if path.name.startswith(".") or not path.name.endswith(_SUFFIX):
                continue
            try:
                raw = json.loads(path.read_text(encoding="utf-8"))
                snapshot = StartSnapshot(**raw)
                if path.name != _name(snapshot.template_id, snapshot.digest):
                    raise ValueError("file name does not match its content")
            except (OSError, ValueError, TypeError) as exc:
                log.warning("start snapshot record %s is damaged, ignored: %s", path, exc)
                continue
            found.append(snapshot)
        return found
