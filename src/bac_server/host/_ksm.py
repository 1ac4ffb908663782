"""The kernel's same-page merging (KSM), turned on for sandboxes when the operator asks.

KSM scans the memory processes marked mergeable and backs identical pages with one
copy-on-write page. Sandboxes restored from one start snapshot hold many identical pages
(envd's heap, a template service's), so merging them roughly halves an idle sandbox's
memory (docs/performance.md). Only marked memory is scanned (envd marks its own and its
children's, ``bac_envd._memory``), so other programs on the host are not affected unless
they marked theirs. The scan's CPU is bounded by the kernel's advisor (Linux 6.9+):
``scan-time`` mode, at most ``max_cpu_pct`` % of one CPU.

SECURITY: merged pages are shared across sandboxes, and a write to one takes measurably
longer than to a private page, so a sandbox can learn whether another holds a page with
given contents (a known cross-tenant side channel). Off by default; for hosts whose
sandboxes all serve one tenant, or where density matters more (docs/security.md).
"""

from __future__ import annotations

import logging
from pathlib import Path

_log = logging.getLogger(__name__)
KSM_DIR = Path("/sys/kernel/mm/ksm")


def enable_ksm(max_cpu_pct: int, ksm_dir: Path = KSM_DIR) -> bool:
    """Start KSM's scanner, its CPU bounded by the advisor where the kernel has one;
    whether it runs (a kernel without KSM: False, said once in the log)."""
    if not (ksm_dir / "run").exists():
        _log.warning("BAC_KSM is on but this kernel has no KSM (%s): pages are not merged",
                     ksm_dir)
        return False
    try:
        if (ksm_dir / "advisor_mode").exists():
            (ksm_dir / "advisor_mode").write_text("scan-time")
            (ksm_dir / "advisor_max_cpu").write_text(str(max_cpu_pct))
        (ksm_dir / "run").write_text("1")
    except OSError as exc:
        _log.warning("could not turn KSM on (%s): pages are not merged", exc)
        return False
    return True
