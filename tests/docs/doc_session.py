"""Run a page's blocks in order, as a reader would in one terminal.

The bash blocks run in one bash process, one after another, so what a block exports, the
variables it sets and the directory it changes to carry into the next ones, as in a
terminal. It runs with ``set -euo pipefail``: a block fails on any command that fails, not
only on its last (a block that means a command to fail says so, ``cmd || echo ...``).
A python block runs where it falls, as ``python -`` (the interpreter first on PATH, the
program on its stdin, in the shell's directory, with its exported variables), which is
what pasting it into ``python -`` does. stdin is /dev/null, stderr goes with stdout, and
each block's output is cut out of the stream by marker lines printed between blocks.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from doc_blocks import Block, matches

_MARKER = "@@docs-test block {}@@"
_MARKER_LINE = re.compile(r"\n@@docs-test block (\d+|end)@@\n")
_PYTHON_END = "__DOCS_TEST_PYTHON_END__"


@dataclass(frozen=True)
class Reader:
    """A reader's shell after the page's set-up: where it starts, its environment, and
    what in a block stands for the server it talks to (replaced by the test's)."""

    home: Path
    env: dict[str, str]
    rewrites: dict[str, str]


@dataclass(frozen=True)
class BlockRun:
    block: Block
    output: str  # stdout and stderr, interleaved as a terminal shows them


@dataclass(frozen=True)
class SessionResult:
    runs: list[BlockRun]  # the blocks that started, in order
    finished: bool  # every block ran and the session exited 0
    returncode: int
    path: Path
    timed_out: bool = False

    def failure(self) -> str | None:
        """Why the session failed (the block, its output), or None."""
        if self.finished:
            return None
        if not self.runs:
            return f"{self.path}: the session exited {self.returncode} before any block ran"
        last = self.runs[-1]
        how = "timed out" if self.timed_out else f"failed (exit {self.returncode})"
        return (f"{self.path}:{last.block.line}: this {last.block.language} block {how}:\n"
                f"{last.block.code}\n--- its output ---\n{last.output}")

    def mismatches(self) -> list[str]:
        """Each block whose output is not the one the page shows after it."""
        return [f"{self.path}:{run.block.line}: the page shows\n{run.block.expected}\n"
                f"--- but it printed ---\n{run.output}"
                for run in self.runs
                if run.block.expected is not None and not matches(run.block.expected,
                                                                  run.output)]


def script(blocks: Sequence[Block], rewrites: Mapping[str, str]) -> str:
    """One bash script running ``blocks`` in order, a marker line before each."""
    parts = ["set -euo pipefail\n"]
    for number, block in enumerate(blocks):
        code = block.code
        for old, new in rewrites.items():
            code = code.replace(old, new)
        parts.append(f"printf '\\n{_MARKER.format(number)}\\n'\n")
        if block.language == "bash":
            parts.append(code)
        elif block.language == "python":
            if _PYTHON_END in code:
                raise ValueError(f"line {block.line}: a python block containing {_PYTHON_END}")
            parts.append(f"python - <<'{_PYTHON_END}'\n{code}{_PYTHON_END}\n")
        else:
            raise ValueError(f"line {block.line}: cannot run a {block.language!r} block")
    parts.append(f"printf '\\n{_MARKER.format('end')}\\n'\n")
    return "".join(parts)


def run(path: Path, blocks: Sequence[Block], *, cwd: Path, env: Mapping[str, str],
        timeout: float, rewrites: Mapping[str, str] | None = None) -> SessionResult:
    """Run ``blocks`` in one bash session; on ``timeout`` the whole session is killed."""
    proc = subprocess.Popen(
        ["bash", "--noprofile", "--norc", "-c", script(blocks, rewrites or {})],
        cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True,
    )
    timed_out = False
    try:
        raw, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        # Everything the session started (a `bac exec`, a python block) goes with it, which
        # also closes the pipe that communicate() reads to its end.
        os.killpg(proc.pid, signal.SIGKILL)
        raw, _ = proc.communicate()
    return _split(path, blocks, raw.decode(errors="replace"), proc.returncode, timed_out)


def _split(path: Path, blocks: Sequence[Block], output: str, returncode: int,
           timed_out: bool) -> SessionResult:
    pieces = _MARKER_LINE.split("\n" + output)
    # pieces: [before the first marker, label, its output, label, its output, ...]
    runs: list[BlockRun] = []
    finished = False
    for label, text in zip(pieces[1::2], pieces[2::2], strict=True):
        if label == "end":
            finished = returncode == 0
            break
        runs.append(BlockRun(blocks[int(label)], text))
    return SessionResult(runs, finished, returncode, path, timed_out)
