"""A Dockerfile's text into instructions: BuildKit's parser, as e2b-dockerfile-utils ports it.

``parse_dockerfile_ast`` reads the parser directives (``# escape=``, ``# syntax=``, only at
the very top), comments, line continuations (skipping comment and blank lines inside one,
with Docker's warning for a blank one), builder flags (``--chown=...``), exec forms and the
``<<EOF`` heredocs of ``RUN``, ``COPY`` and ``ADD``. Words, quotes and variables are the
next stage's business (:mod:`._words`).

Its errors become :class:`DockerfileError` at the file and line, in BuildKit's words,
except two that say more here: a word that is no instruction names the nearest one
(``FRM`` → ``did you mean FROM?``), and an unterminated heredoc names the line it waits for.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection

from e2b_dockerfile_utils import (
    DockerfileAst,
    DockerfileSyntaxError,
    parse_dockerfile_ast,
    parse_heredoc,
    parse_words,
)

from bac._template._errors import DockerfileError, Origin

_WHERE = re.compile(r"Dockerfile parse error(?: on line \d+)?: ")
_UNKNOWN = "unknown instruction: "


def unknown_instruction(name: str, known: Collection[str]) -> str:
    """The error for a word that is no instruction, with the nearest one (a typo's fix)."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"unknown instruction {name!r}" + (f" (did you mean {close[0]}?)" if close else "")


def _unterminated(text: str, line: int) -> str | None:
    """Which heredoc of ``line`` never ends, when its marker is on that line."""
    lines = [item.rstrip("\r") for item in text.removeprefix("\ufeff").split("\n")]
    for word in parse_words(lines[line - 1], "\\"):
        try:
            heredoc = parse_heredoc(word)
        except ValueError:
            continue
        if heredoc is None:
            continue
        ends = {item.lstrip("\t") if heredoc.chomp else item for item in lines[line:]}
        if heredoc.name not in ends:
            return (f"heredoc <<{heredoc.name} is never terminated "
                    f"(expected a line '{heredoc.name}')")
    return None


def read_dockerfile(text: str, file: str, known: Collection[str]) -> DockerfileAst:
    """Split ``text`` into instructions; raise :class:`DockerfileError` on what BuildKit's
    parser refuses. ``known``: the instructions a misspelt one may be meant as."""
    try:
        return parse_dockerfile_ast(text)
    except DockerfileSyntaxError as exc:
        reason = str(exc)
        where = _WHERE.match(reason)
        reason = reason[where.end() :] if where is not None else reason
        if reason.startswith(_UNKNOWN):
            reason = unknown_instruction(reason.removeprefix(_UNKNOWN).upper(), known)
        elif reason == "unterminated heredoc" and exc.line is not None:
            reason = _unterminated(text, exc.line) or reason
        origin = Origin(file, exc.line) if exc.line is not None else None
        raise DockerfileError(reason, origin, file=file) from exc
