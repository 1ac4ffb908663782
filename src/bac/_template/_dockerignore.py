"""``.dockerignore``: which files of a build context COPY never sees.

Docker's rules: one pattern a line, ``#`` comments, blank lines skipped; patterns are
relative to the context root (a leading ``/`` is dropped) and cleaned; ``*`` and ``?``
match within one path segment, ``**`` any number of segments, ``[a-z]`` a class, ``\\``
escapes; a pattern that matches a directory excludes everything under it; ``!pattern``
re-includes, and the last pattern that matches a path decides.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bac._errors import InvalidArgumentError


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """A cleaned pattern as a regex over context-relative paths (COPY sources use it too)."""
    out: list[str] = []
    index = 0
    while index < len(pattern):
        ch = pattern[index]
        if ch == "*" and pattern[index + 1 : index + 2] == "*":
            index += 2
            if pattern[index : index + 1] == "/":
                index += 1
                out.append("(?:.*/)?")
            else:
                out.append(".*")
            continue
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = pattern.find("]", index + 2)
            if end < 0:
                raise InvalidArgumentError(f"ignore pattern {pattern!r}: unterminated [")
            body = pattern[index + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            index = end
        elif ch == "\\" and index + 1 < len(pattern):
            index += 1
            out.append(re.escape(pattern[index]))
        else:
            out.append(re.escape(ch))
        index += 1
    return re.compile("".join(out))


@dataclass(frozen=True)
class _Rule:
    regex: re.Pattern[str]
    include: bool  # a ``!`` pattern


class IgnoreRules:
    """Compiled ignore patterns; :meth:`ignored` answers for a context-relative path."""

    def __init__(self, patterns: Iterable[str]) -> None:
        rules: list[_Rule] = []
        for raw in patterns:
            text = raw.strip()
            if not text or text.startswith("#"):
                continue
            include = text.startswith("!")
            text = text[1:].strip() if include else text
            text = posixpath.normpath(text).lstrip("/")
            if text in ("", "."):
                continue
            rules.append(_Rule(pattern_regex(text), include))
        self._rules = tuple(rules)
        self.has_exceptions = any(rule.include for rule in rules)

    def ignored(self, path: str) -> bool:
        """True when ``path`` (posix, relative to the context) is excluded."""
        if not self._rules or path in ("", "."):
            return False
        candidates = [path]
        parent = posixpath.dirname(path)
        while parent:
            candidates.append(parent)
            parent = posixpath.dirname(parent)
        excluded = False
        for rule in self._rules:
            if any(rule.regex.fullmatch(candidate) for candidate in candidates):
                excluded = not rule.include
        return excluded


def read_patterns(context: Path, extra: Sequence[str] = (),
                  specific: Path | None = None) -> list[str]:
    """The patterns of ``specific`` (``Dockerfile.dockerignore``) if given, else the
    context's ``.dockerignore``, followed by ``extra``."""
    source = specific if specific is not None else context / ".dockerignore"
    try:
        text = source.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read {source}: {exc.strerror}") from exc
    return [*text.splitlines(), *extra]
