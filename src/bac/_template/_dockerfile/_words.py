"""Words of a Dockerfile instruction: quotes, escapes, ``$VAR`` substitution, flags.

Docker substitutes variables in ``FROM``, ``COPY``, ``ADD``, ``ENV``, ``ARG``,
``WORKDIR`` and ``USER`` (never in ``RUN``, ``CMD`` or ``ENTRYPOINT``, where the shell does
it): ``$NAME``, ``${NAME}``, ``${NAME:-default}``, ``${NAME-default}``,
``${NAME:+alt}``, ``${NAME+alt}``, ``${NAME:?message}`` and ``${NAME?message}``.
Single quotes keep text literal; in double quotes the escape character escapes only
``"``, ``$`` and itself; outside quotes it escapes anything.

A name the Dockerfile never declared may still be set in the base template's environment
(``PATH``, ``HOME``), which only the build knows: with ``keep_unknown`` (ENV values) such
references stay in the text as written, for the build to substitute, and a ``$`` that
quotes or escapes made literal is sent as ``\\$`` so that the build leaves it alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

_NAME = re.compile(r"[A-Za-z0-9_]+")
_BLANKS = re.compile(r"[ \t\r\n]+")
_FLAG = re.compile(r"--([A-Za-z][A-Za-z0-9-]*)(?:=(\S*))?(?:\s+|$)")


class WordError(ValueError):
    """A malformed word; the caller adds the Dockerfile location."""


@dataclass
class _Scan:
    text: str
    escape: str
    env: Mapping[str, str]
    keep_unknown: bool
    pos: int = 0

    @property
    def dollar_text(self) -> str:
        """A literal ``$`` in the output."""
        return "\\$" if self.keep_unknown else "$"

    def peek(self, offset: int = 0) -> str:
        at = self.pos + offset
        return self.text[at] if at < len(self.text) else ""

    def single_quoted(self) -> str:
        end = self.text.find("'", self.pos + 1)
        if end < 0:
            raise WordError("unexpected end of text while looking for the matching '")
        value = self.text[self.pos + 1 : end]
        self.pos = end + 1
        return value.replace("$", self.dollar_text)

    def double_quoted(self) -> str:
        self.pos += 1
        out: list[str] = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == '"':
                self.pos += 1
                return "".join(out)
            if ch == self.escape and self.peek(1) in ('"', "$", self.escape):
                out.append(self.dollar_text if self.peek(1) == "$" else self.peek(1))
                self.pos += 2
            elif ch == "$":
                out.append(self.dollar())
            else:
                out.append(ch)
                self.pos += 1
        raise WordError('unexpected end of text while looking for the matching "')

    def lookup(self, name: str, raw: str) -> str | None:
        """The value of ``name``; None when unset (the raw reference when kept)."""
        if name in self.env:
            return self.env[name]
        return raw if self.keep_unknown else None

    def dollar(self) -> str:
        start = self.pos
        if self.peek(1) == "{":
            return self.braced(start)
        match = _NAME.match(self.text, self.pos + 1)
        if match is None:
            self.pos += 1
            return self.dollar_text
        self.pos = match.end()
        value = self.lookup(match.group(0), self.text[start : self.pos])
        return value or ""

    def braced(self, start: int) -> str:
        match = _NAME.match(self.text, self.pos + 2)
        if match is None:
            raise WordError(f"bad substitution in {self.text[start:start + 20]!r}")
        name = match.group(0)
        self.pos = match.end()
        if self.peek() == "}":
            self.pos += 1
            return self.lookup(name, self.text[start : self.pos]) or ""
        if not self.peek():
            raise WordError("missing } in a ${...} substitution")
        colon = self.peek() == ":"
        op = self.peek(1) if colon else self.peek()
        if op not in ("-", "+", "?"):
            raise WordError(f"unsupported substitution ${{{name}{self.peek()}...}}: "
                            "only :- - :+ + :? ? are supported")
        self.pos += 2 if colon else 1
        word = self.until_brace()
        raw = self.text[start : self.pos]
        if name not in self.env and self.keep_unknown:
            return raw
        value = self.env.get(name)
        present = value is not None and (value != "" or not colon)
        if op == "-":
            return value if present and value is not None else word
        if op == "+":
            return word if present else ""
        if not present:
            raise WordError(f"{name}: {word or 'is not set'}")
        return value or ""

    def until_brace(self) -> str:
        out: list[str] = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "}":
                self.pos += 1
                return "".join(out)
            out.append(self.step())
        raise WordError("missing } in a ${...} substitution")

    def step(self) -> str:
        """Consume one unit (a character, an escape, a quoted run, a substitution)."""
        ch = self.text[self.pos]
        if ch == self.escape:
            if self.pos + 1 >= len(self.text):
                self.pos += 1
                return ch
            self.pos += 2
            escaped = self.text[self.pos - 1]
            return self.dollar_text if escaped == "$" else escaped
        if ch == "'":
            return self.single_quoted()
        if ch == '"':
            return self.double_quoted()
        if ch == "$":
            return self.dollar()
        self.pos += 1
        return ch


def process_word(text: str, escape: str, env: Mapping[str, str],
                 keep_unknown: bool = False) -> str:
    """``text`` as one word: quotes removed, variables substituted, nothing split."""
    scan = _Scan(text, escape, env, keep_unknown)
    out: list[str] = []
    while scan.pos < len(text):
        out.append(scan.step())
    return "".join(out)


def process_words(text: str, escape: str, env: Mapping[str, str],
                  keep_unknown: bool = False) -> list[str]:
    """``text`` split into words at unquoted blanks (also inside unquoted substitutions)."""
    scan = _Scan(text, escape, env, keep_unknown)
    words: list[str] = []
    current: list[str] = []
    in_word = False
    while scan.pos < len(text):
        ch = text[scan.pos]
        if ch in " \t\r\n":
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
            scan.pos += 1
            continue
        if ch != "$":
            current.append(scan.step())
            in_word = True
            continue
        for index, piece in enumerate(_BLANKS.split(scan.dollar())):
            if index > 0 and in_word:
                words.append("".join(current))
                current, in_word = [], False
            if piece:
                current.append(piece)
                in_word = True
    if in_word:
        words.append("".join(current))
    return words


def split_flags(rest: str) -> tuple[list[tuple[str, str | None]], str]:
    """Leading ``--name[=value]`` flags of an instruction, and the text after them."""
    flags: list[tuple[str, str | None]] = []
    while rest.startswith("--"):
        match = _FLAG.match(rest)
        if match is None:
            raise WordError(f"malformed flag {rest.split()[0]!r}")
        flags.append((match.group(1), match.group(2)))
        rest = rest[match.end() :]
    return flags, rest


def json_array(rest: str) -> list[str] | None:
    """The exec form ``["a", "b"]`` as a list; None when ``rest`` is the shell form."""
    if not rest.startswith("["):
        return None
    try:
        value = json.loads(rest)
    except ValueError:
        return None
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return None
