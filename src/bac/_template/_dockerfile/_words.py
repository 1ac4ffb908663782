"""Words of a Dockerfile instruction: variables substituted, quotes and escapes removed.

BuildKit's shell lexer does it (``ShellLex``, as e2b-dockerfile-utils ports it), where
Docker does it: ``FROM``, ``COPY``/``ADD``, ``ENV``, ``ARG``, ``WORKDIR`` and ``USER``
(never ``RUN``, ``CMD`` or ``ENTRYPOINT``, where the shell does it). ``$NAME``,
``${NAME}``, ``${NAME:-word}``, ``${NAME-word}``, ``${NAME:+word}``, ``${NAME+word}``,
``${NAME:?message}``, ``${NAME?message}`` and the pattern forms ``${NAME#pattern}``,
``${NAME%pattern}``, ``${NAME/pattern/replacement}``; single quotes keep text literal, in
double quotes the escape character escapes only ``"``, ``$`` and itself.

A name the Dockerfile never declared may still be set in the base template's environment
(``PATH``, ``HOME``), which only the build knows: :func:`defer` (ENV values) leaves such
references as written for the build to substitute, and sends a ``$`` that quotes or
escapes made literal as ``\\$`` so that the build leaves it alone. ShellLex keeps the
references it cannot resolve, but its output does not say which ``$`` it kept as a
reference and which as a literal; the lexer itself is asked, per ``$``: a ``$`` starts a
reference exactly where putting ``${}`` in its place is a bad substitution.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TypeVar

from e2b_dockerfile_utils import ShellLex

# Follows a `$` that the lexer is to keep literal; `$` + it leaves as `\$`.
_LITERAL = "\ue000"
# What may follow a `$` that names something (ShellLex's names and special parameters).
_NAMED = re.compile(r"[{\w@*#?!$-]")
# A reference left for the build in a form it cannot substitute.
_PATTERN_FORM = re.compile(r"(?<!\\)\$\{(\w+)([#%/])")
_T = TypeVar("_T")


class WordError(ValueError):
    """A malformed word or a failed ``${NAME:?message}``; the caller adds the location."""


def _lexed(process: Callable[[str], _T], text: str) -> _T:
    try:
        return process(text)
    except ValueError as exc:
        raise WordError(str(exc).replace(_LITERAL, "")) from exc


def expand(text: str, escape: str, env: Mapping[str, str]) -> str:
    """``text`` as one word; a name not in ``env`` is empty, as in Docker for a name the
    image does not set."""
    return _lexed(ShellLex(escape, env=env, skip_unset_env=False).process_word, text)


def expand_words(text: str, escape: str, env: Mapping[str, str]) -> list[str]:
    """``text`` split into words at unquoted blanks (also inside unquoted substitutions)."""
    return _lexed(ShellLex(escape, env=env, skip_unset_env=False).process_words, text)


def _starts_reference(text: str, index: int, escape: str) -> bool:
    if not _NAMED.match(text, index + 1):
        return False  # `$` alone, or before a quote: the lexer keeps it literal
    try:
        ShellLex(escape).process_word(text[:index] + "${}" + text[index + 1 :])
    except ValueError:
        return True
    return False


def defer(text: str, escape: str, literal: Mapping[str, str], sent: Mapping[str, str]) -> str:
    """``text`` as one word for the build: names of ``literal`` (values as written) and of
    ``sent`` (values already in this form) substituted, other references left as written,
    literal dollars as ``\\$``."""
    marked = "".join(char + _LITERAL if char == "$" and not _starts_reference(text, i, escape)
                     else char for i, char in enumerate(text))
    env = {**{name: value.replace("$", "$" + _LITERAL) for name, value in literal.items()},
           **sent}
    value = _lexed(ShellLex(escape, env=env, skip_unset_env=True).process_word, marked)
    unsupported = _PATTERN_FORM.search(value)
    if unsupported is not None:
        name, form = unsupported.groups()
        raise WordError(f"unsupported substitution ${{{name}{form}...}}: {name} is not "
                        "declared, and the build substitutes only :- - :+ + :? ? forms")
    return value.replace("$" + _LITERAL, "\\$")


def split_flag(flag: str) -> tuple[str, str | None]:
    """A builder flag as the parser gives it (``--name=value``, ``--name``): its name and
    value (None without ``=``)."""
    name, has_value, value = flag.removeprefix("--").partition("=")
    return name, value if has_value else None
