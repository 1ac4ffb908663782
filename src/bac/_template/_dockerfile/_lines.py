"""A Dockerfile's text into instructions: directives, comments, continuations, heredocs.

Follows Docker's reader: parser directives (``# escape=``, ``# syntax=``) only at the very
top; a line ending in the escape character (``\\`` unless changed) continues on the next
line, skipping comment and blank lines in between; ``<<EOF`` heredocs in ``RUN``, ``COPY``
and ``ADD`` take the following lines up to the terminator. Words, quotes and variables are
the next stage's business (:mod:`._words`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bac._template._errors import DockerfileError, Origin

_DIRECTIVE = re.compile(r"#\s*([A-Za-z][A-Za-z0-9_-]*)\s*=\s*(.*?)\s*$")
_KNOWN_DIRECTIVES = frozenset({"escape", "syntax", "check"})
_HEREDOC = re.compile(r"(?<!<)<<(-?)(\"|'|)([A-Za-z_][A-Za-z0-9_.-]*)\2(?![<\w])")
_HEREDOC_INSTRUCTIONS = frozenset({"RUN", "COPY", "ADD"})


@dataclass(frozen=True)
class Heredoc:
    """``<<NAME`` and the lines that followed it (each ending in a newline)."""

    name: str
    body: str
    expand: bool  # unquoted delimiter: the body may use variables
    marker: str  # as written, e.g. ``<<-"EOF"``


@dataclass(frozen=True)
class RawInstruction:
    """One instruction with continuations joined: its keyword, the rest of its text."""

    name: str  # upper case
    rest: str
    origin: Origin
    heredocs: tuple[Heredoc, ...] = ()

    @property
    def text(self) -> str:
        """The instruction as one line, for messages."""
        flat = " ".join(self.rest.split())
        return f"{self.name} {flat}" if flat else self.name


@dataclass(frozen=True)
class DockerfileText:
    escape: str
    instructions: tuple[RawInstruction, ...]


def _directives(lines: list[str], file: str) -> tuple[str, int]:
    """The escape character and the index of the first line after the directives."""
    escape = "\\"
    seen: set[str] = set()
    for index, line in enumerate(lines):
        match = _DIRECTIVE.fullmatch(line.strip())
        if match is None or match.group(1).lower() not in _KNOWN_DIRECTIVES:
            return escape, index
        key, value = match.group(1).lower(), match.group(2)
        origin = Origin(file, index + 1)
        if key in seen:
            raise DockerfileError(f"only one {key} parser directive can be used", origin)
        seen.add(key)
        if key == "escape":
            if value not in ("\\", "`"):
                raise DockerfileError(
                    f"invalid escape token {value!r}: expected \\ or `", origin)
            escape = value
    return escape, len(lines)


def _is_skipped(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _continues(line: str, escape: str) -> bool:
    return line.rstrip(" \t").endswith(escape)


def _heredocs(rest: str, lines: list[str], index: int,
              origin: Origin) -> tuple[tuple[Heredoc, ...], int]:
    found: list[Heredoc] = []
    for match in _HEREDOC.finditer(rest):
        chomp, quote, name = match.group(1) == "-", match.group(2), match.group(3)
        body: list[str] = []
        while True:
            if index >= len(lines):
                raise DockerfileError(
                    f"heredoc <<{name} is never terminated (expected a line '{name}')", origin)
            line = lines[index]
            index += 1
            if chomp:
                line = line.lstrip("\t")
            if line == name:
                break
            body.append(line + "\n")
        found.append(Heredoc(name, "".join(body), expand=not quote, marker=match.group(0)))
    return tuple(found), index


def read_dockerfile(text: str, file: str = "Dockerfile") -> DockerfileText:
    """Split ``text`` into instructions; raise :class:`DockerfileError` on a bad directive
    or an unterminated heredoc. Instruction names are not checked here."""
    lines = text.removeprefix("\ufeff").splitlines()
    escape, index = _directives(lines, file)
    found: list[RawInstruction] = []
    while index < len(lines):
        line = lines[index]
        index += 1
        if _is_skipped(line):
            continue
        origin = Origin(file, index)
        joined = line
        while _continues(joined, escape):
            joined = joined.rstrip(" \t")[: -len(escape)]
            while index < len(lines) and _is_skipped(lines[index]):
                index += 1
            if index >= len(lines):
                break
            joined += lines[index]
            index += 1
        keyword, *more = joined.strip().split(None, 1)
        name = keyword.upper()
        rest = more[0].strip() if more else ""
        heredocs: tuple[Heredoc, ...] = ()
        if name in _HEREDOC_INSTRUCTIONS:
            heredocs, index = _heredocs(rest, lines, index, origin)
        found.append(RawInstruction(name, rest, origin, heredocs))
    return DockerfileText(escape, tuple(found))
