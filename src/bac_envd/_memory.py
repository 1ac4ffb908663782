"""Offering this sandbox's memory to the host's page merging (KSM), when the host asks.

With ``BAC_KSM`` on, the server starts envd with ``BAC_ENVD_MERGE=1``: envd then marks its
memory mergeable (``prctl(PR_SET_MEMORY_MERGE)``, Linux 6.4+), a mark its children and the
programs they run inherit, so the kernel's KSM may back identical pages of different
sandboxes (those restored from the same start snapshot above all) with one copy. After a
restore the mark is set again (``/init``): CRIU brings back each area's own mark, not the
process's. A kernel without the call, or a refusal, leaves memory as it was: merging only
ever saves memory, nothing depends on it.
"""

from __future__ import annotations

import os

_PR_SET_MEMORY_MERGE = 67
_ASKED = "BAC_ENVD_MERGE"


def merge_pages() -> bool:
    """Mark this process's memory mergeable if the host asked; whether it is now."""
    if os.environ.get(_ASKED) != "1":
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_MEMORY_MERGE, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False
