"""Fenced code blocks of a markdown page, with the docs-test annotations that say which run.

A block is annotated by an HTML comment on the line just before its opening fence, visible
in the page's source and invisible once rendered:

    <!-- docs-test: run -->                       run this block (pages that opt in per block)
    <!-- docs-test: skip (why it cannot run) -->   never run it; the reason is required

A ```output block shows what the code block just before it prints; the runner compares
the two, with ``...`` standing for any text (an id, a time). An annotation anywhere else,
an unknown directive or a skip without its reason is an error, so nothing is left out
silently.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from pathlib import Path

RUNNABLE = frozenset({"bash", "python"})
OUTPUT = "output"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_ANNOTATION = re.compile(r"^\s*<!--\s*docs-test:(?P<body>.*?)-->\s*$")
_ANNOTATION_START = re.compile(r"^\s*<!--\s*docs-test:")
_SKIP = re.compile(r"^skip\s*\((?P<reason>.*\S.*)\)$")


class DocsTestError(ValueError):
    """The page's blocks or annotations are malformed; the message names the line."""


class Action(enum.Enum):
    RUN = "run"
    SKIP = "skip"
    NONE = "none"  # not annotated


class Mode(enum.Enum):
    """Which unannotated blocks run: every bash and python block (a tutorial), or none
    (a reference page, whose complete programs opt in with ``docs-test: run``)."""

    ALL = "all"
    OPT_IN = "opt-in"


@dataclasses.dataclass(frozen=True)
class Block:
    language: str  # the info string's first word ("" when there is none)
    code: str
    line: int  # 1-based line of the opening fence
    action: Action = Action.NONE
    reason: str = ""
    # The ```output block that follows, if any: what the reader is told it prints.
    expected: str | None = None

    def runs(self, mode: Mode) -> bool:
        if self.action is Action.RUN:
            return True
        return mode is Mode.ALL and self.action is Action.NONE and self.language in RUNNABLE


@dataclasses.dataclass(frozen=True)
class Page:
    path: Path
    blocks: tuple[Block, ...]

    def runnable(self, mode: Mode) -> list[Block]:
        return [block for block in self.blocks if block.runs(mode)]

    def skipped(self) -> list[Block]:
        return [block for block in self.blocks if block.action is Action.SKIP]


def parse(text: str, path: Path = Path("<page>")) -> Page:
    """The fenced blocks of ``text`` in order, each with its annotation and its output."""
    lines = text.splitlines()
    blocks: list[Block] = []
    # An annotation waiting for the fence on the next line: (action, reason, its line).
    pending: tuple[Action, str, int] | None = None
    index = 0
    while index < len(lines):
        number = index + 1
        annotation = _ANNOTATION.match(lines[index])
        if annotation is None and _ANNOTATION_START.match(lines[index]):
            raise DocsTestError(f"{path}:{number}: a docs-test annotation is one line, "
                                "<!-- docs-test: ... -->")
        fence = None if annotation else _FENCE.match(lines[index])
        if pending is not None and fence is None:
            raise DocsTestError(f"{path}:{pending[2]}: a docs-test annotation with no code "
                                "block on the next line")
        if annotation:
            pending = (*_directive(annotation["body"].strip(), f"{path}:{number}"), number)
            index += 1
            continue
        if fence is None:
            index += 1
            continue
        code, index = _body(lines, number, fence, f"{path}:{number}")
        language = (fence["info"].split() or [""])[0].lower()
        action, reason = (pending[0], pending[1]) if pending else (Action.NONE, "")
        pending = None
        if language == OUTPUT:
            _attach_output(blocks, code, action, f"{path}:{number}")
        elif action is Action.RUN and language not in RUNNABLE:
            raise DocsTestError(f"{path}:{number}: only {'/'.join(sorted(RUNNABLE))} "
                                f"blocks run, not {language or 'one without a language'}")
        else:
            blocks.append(Block(language, code, number, action, reason))
    if pending is not None:
        raise DocsTestError(f"{path}:{pending[2]}: a docs-test annotation with no code "
                            "block on the next line")
    return Page(path, tuple(blocks))


def load(path: Path) -> Page:
    return parse(path.read_text(encoding="utf-8"), path)


def _directive(body: str, where: str) -> tuple[Action, str]:
    if body == "run":
        return Action.RUN, ""
    skip = _SKIP.match(body)
    if skip:
        return Action.SKIP, skip["reason"].strip()
    if body.startswith("skip"):
        raise DocsTestError(f"{where}: a skip says why: <!-- docs-test: skip (reason) -->")
    raise DocsTestError(f"{where}: unknown docs-test directive {body!r} "
                        "(expected 'run' or 'skip (reason)')")


def _body(lines: list[str], start: int, fence: re.Match[str], where: str) -> tuple[str, int]:
    """The block's text (its fence's indentation removed) and the line after its end."""
    indent, marker = len(fence["indent"]), fence["fence"]
    closing = re.compile(rf"^[ \t]*{re.escape(marker[0])}{{{len(marker)},}}\s*$")
    body: list[str] = []
    for index in range(start, len(lines)):
        if closing.match(lines[index]):
            return "".join(f"{text}\n" for text in body), index + 1
        text = lines[index]
        body.append(text[indent:] if text[:indent].strip() == "" else text.lstrip())
    raise DocsTestError(f"{where}: a code block that is never closed")


def _attach_output(blocks: list[Block], expected: str, action: Action, where: str) -> None:
    """Give the block just before an output block the output it is shown to print."""
    if action is not Action.NONE:
        raise DocsTestError(f"{where}: an output block is checked with the block before "
                            "it: annotate that one")
    if not blocks or blocks[-1].language not in RUNNABLE or blocks[-1].expected is not None:
        raise DocsTestError(f"{where}: an output block must follow the bash or python "
                            "block whose output it shows")
    blocks[-1] = dataclasses.replace(blocks[-1], expected=expected)


def matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` is what ``expected`` shows: trailing spaces and blank lines at
    either end aside, with ``...`` standing for any text, newlines included."""
    pattern = ".*?".join(re.escape(part) for part in _tidy(expected).split("..."))
    return re.fullmatch(pattern, _tidy(actual), flags=re.DOTALL) is not None


def _tidy(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()).strip("\n")
