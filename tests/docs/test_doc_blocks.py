"""The docs runner itself: which blocks a page runs, how its annotations are read, how
outputs are compared, and that the shell carries state from block to block."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import doc_session
import pytest
from doc_blocks import Action, DocsTestError, Mode, load, matches, parse

REPO = Path(__file__).resolve().parents[2]

PAGE = """\
# A page

<!-- docs-test: skip (it needs a terminal) -->
```bash
bac shell $SBX
```

```bash
echo one
```

```output
one
```

```text
shown only
```

<!-- docs-test: run -->
```python
print("two")
```

1. In a list:

   ```bash
   echo three
   ```
"""


def test_a_tutorial_runs_every_bash_and_python_block_but_the_skipped() -> None:
    page = parse(PAGE)
    runnable = page.runnable(Mode.ALL)
    assert [b.code for b in runnable] == ["echo one\n", 'print("two")\n', "echo three\n"]
    assert [(b.action, b.reason) for b in page.skipped()] == [(Action.SKIP, "it needs a terminal")]


def test_a_reference_page_runs_only_the_blocks_marked_run() -> None:
    assert [b.code for b in parse(PAGE).runnable(Mode.OPT_IN)] == ['print("two")\n']


def test_an_output_block_belongs_to_the_block_before_it() -> None:
    page = parse(PAGE)
    assert [b.expected for b in page.blocks] == [None, "one\n", None, None, None]
    assert all(block.language != "output" for block in page.blocks)


def test_a_block_in_a_list_loses_its_indentation() -> None:
    assert parse(PAGE).blocks[-1].code == "echo three\n"


@pytest.mark.parametrize(("text", "message"), [
    ("<!-- docs-test: skip -->\n```bash\nx\n```\n", "a skip says why"),
    ("<!-- docs-test: skip () -->\n```bash\nx\n```\n", "a skip says why"),
    ("<!-- docs-test: runn -->\n```bash\nx\n```\n", "unknown docs-test directive"),
    ("<!-- docs-test: run -->\n\n```bash\nx\n```\n", "no code block on the next line"),
    ("```bash\nx\n```\n<!-- docs-test: run -->\n", "no code block on the next line"),
    ("<!-- docs-test: run -->\n```text\nx\n```\n", "not text"),
    ("```text\nx\n```\n```output\nx\n```\n", "must follow the bash or python block"),
    ("```output\nx\n```\n", "must follow the bash or python block"),
    ("```bash\nx\n```\n```output\nx\n```\n```output\nx\n```\n", "must follow"),
    ("```bash\nx\n```\n<!-- docs-test: run -->\n```output\nx\n```\n", "annotate that one"),
    ("```bash\nx\n", "never closed"),
    ("<!-- docs-test: skip (a reason\non two lines) -->\n```bash\nx\n```\n", "is one line"),
])
def test_a_malformed_annotation_is_an_error_naming_its_line(text: str, message: str) -> None:
    with pytest.raises(DocsTestError, match=message) as caught:
        parse(text, Path("page.md"))
    assert str(caught.value).startswith("page.md:")


def test_an_output_matches_with_ellipses_and_trailing_space_aside() -> None:
    assert matches("hello from ... as user\n", "hello from abc123 as user  \n\n")
    assert matches("killed ...\n", "killed a\nb\n")  # ... spans lines, as in doctest
    assert matches("a\n...\nd\n", "a\nb\nc\nd\n")
    assert not matches("exit 3\n", "exit 4\n")
    assert not matches("a\n", "a\nb\n")


@pytest.mark.parametrize("page", ["README.md", "docs/sdk.md", "docs/tutorial.md"])
def test_the_pages_annotations_are_well_formed(page: str) -> None:
    load(REPO / page)  # raises DocsTestError naming the line otherwise


def test_the_shell_carries_variables_and_directory_into_later_blocks(tmp_path: Path) -> None:
    page = parse("""\
```bash
mkdir -p work && cd work
SEEN=here
export SHARED=shared
```
```bash
echo "$SEEN $(basename "$PWD")"
```
```output
here work
```
```python
import os
print(os.environ["SHARED"], os.path.basename(os.getcwd()))
```
```output
shared work
```
""")
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = doc_session.run(Path("page.md"), page.runnable(Mode.ALL), cwd=tmp_path, env=env,
                             timeout=60)
    assert result.finished, result.failure()
    assert result.mismatches() == []


def test_a_failing_command_fails_its_block_and_stops_the_page(tmp_path: Path) -> None:
    page = parse("```bash\nfalse\necho after\n```\n```bash\necho never\n```\n")
    result = doc_session.run(Path("page.md"), page.runnable(Mode.ALL), cwd=tmp_path,
                             env={"PATH": os.environ["PATH"]}, timeout=60)
    assert not result.finished
    assert len(result.runs) == 1
    assert "page.md:1: this bash block failed (exit 1)" in (result.failure() or "")


def test_an_output_that_differs_is_reported_with_both(tmp_path: Path) -> None:
    page = parse("```bash\necho 4\n```\n```output\n5\n```\n")
    result = doc_session.run(Path("page.md"), page.runnable(Mode.ALL), cwd=tmp_path,
                             env={"PATH": os.environ["PATH"]}, timeout=60)
    assert result.finished
    assert result.mismatches() == ["page.md:1: the page shows\n5\n\n--- but it printed ---\n4\n"]


def test_the_server_s_address_is_rewritten_to_the_test_s(tmp_path: Path) -> None:
    page = parse("```bash\necho http://localhost:3000/x\n```\n")
    result = doc_session.run(Path("page.md"), page.runnable(Mode.ALL), cwd=tmp_path,
                             env={"PATH": os.environ["PATH"]}, timeout=60,
                             rewrites={"http://localhost:3000": "http://127.0.0.1:9"})
    assert [run.output for run in result.runs] == ["http://127.0.0.1:9/x\n"]


def test_a_session_past_its_timeout_is_killed_with_what_it_started(tmp_path: Path) -> None:
    page = parse("```bash\necho started\nsleep 600 &\nwait\n```\n")
    result = doc_session.run(Path("page.md"), page.runnable(Mode.ALL), cwd=tmp_path,
                             env={"PATH": os.environ["PATH"]}, timeout=2)
    assert result.timed_out and not result.finished
    assert "timed out" in (result.failure() or "")
    assert result.runs[0].output == "started\n"
