"""What the benchmarks wait for before measuring: the start snapshots the first creates
asked for (a built-in template's is taken in the background after its first create)."""

from __future__ import annotations

import json
import time
from pathlib import Path


def wait_start_snapshots(data_dir: Path, count: int = 1, deadline_s: float = 120) -> int:
    """Wait until ``count`` start snapshots are complete (their records are rewritten
    ``complete`` once the checkpoint is on disk); how many there are then."""
    end = time.monotonic() + deadline_s
    records = data_dir / "start-snapshots"
    found: list[dict[str, object]] = []
    while time.monotonic() < end:
        found = [json.loads(p.read_text()) for p in records.glob("*.json")]
        if len(found) >= count and all(r["complete"] for r in found):
            break
        time.sleep(0.2)
    return sum(1 for r in found if r["complete"])
