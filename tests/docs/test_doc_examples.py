"""README.md's and docs/sdk.md's complete programs (the blocks marked ``docs-test: run``)
run in order, one shell per page, against a real server, as a reader who followed the
page: BAC_* and E2B_* pointing at the server, as both pages say to set them."""

from __future__ import annotations

from pathlib import Path

import doc_session
import pytest
from doc_blocks import Mode, load
from doc_session import Reader

pytestmark = [pytest.mark.root, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("page", ["README.md", "docs/sdk.md"])
def test_the_marked_examples_run_and_print_what_they_show(page: str, reader: Reader) -> None:
    path = REPO / page
    blocks = load(path).runnable(Mode.OPT_IN)
    assert blocks, f"{page} has no block marked docs-test: run"
    env = reader.env | {"E2B_API_URL": reader.env["BAC_API_URL"],
                        "E2B_SANDBOX_URL": reader.env["BAC_API_URL"],
                        "E2B_API_KEY": reader.env["BAC_API_KEY"]}
    result = doc_session.run(path, blocks, cwd=reader.home, env=env, timeout=240,
                             rewrites=reader.rewrites)
    assert result.finished, result.failure()
    assert not result.mismatches(), "\n\n".join(result.mismatches())
