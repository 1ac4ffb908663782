"""docs/tutorial.md, run as a new reader runs it: every bash and python block, in order, in
one shell, against a real server, each shown output compared with what its block printed."""

from __future__ import annotations

import re
from pathlib import Path

import doc_session
import pytest
from doc_blocks import Mode, load
from doc_session import Reader

pytestmark = [pytest.mark.root, pytest.mark.slow]

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"
# Shown, never run: a Dockerfile, a log. A runnable block in any other language would be
# left out silently.
SHOWN_ONLY = {"text", "dockerfile"}


def test_the_tutorial_runs_and_prints_what_it_shows(reader: Reader) -> None:
    page = load(TUTORIAL)
    assert {b.language for b in page.blocks} <= {"bash", "python"} | SHOWN_ONLY
    # The set-up the test cannot run (scripts/up, reading the key as root) leaves the
    # reader with variables: the test's shell has them instead, for its own server.
    exported = {name for block in page.skipped()
                for name in re.findall(r"^export (\w+)=", block.code, flags=re.MULTILINE)}
    assert exported == {"PATH", "BAC_API_KEY"}
    assert exported <= reader.env.keys()

    result = doc_session.run(TUTORIAL, page.runnable(Mode.ALL), cwd=reader.home,
                             env=reader.env, timeout=240, rewrites=reader.rewrites)
    assert result.finished, result.failure()
    assert not result.mismatches(), "\n\n".join(result.mismatches())
    assert len(result.runs) == len(page.runnable(Mode.ALL))
