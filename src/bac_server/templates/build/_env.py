"""Variable references in ENV values, substituted by the build against its environment.

The Dockerfile parser substitutes what the Dockerfile declares; a name it never declared
(``PATH`` of the base image) stays in the value as written, for the build to substitute
from the environment the step runs in, and a ``$`` made literal by quotes or escapes
arrives as ``\\$``. Docker's forms are all understood::

    $NAME  ${NAME}                  the value, empty when unset
    ${NAME:-word}  ${NAME-word}     word when NAME is unset or empty (``-``: only unset)
    ${NAME:+word}  ${NAME+word}     word when NAME is set and not empty (``+``: set)
    ${NAME:?word}  ${NAME?word}     the build fails with word when NAME is unset/empty

``word`` may hold references itself. Text that is no reference (``$`` alone, ``${`` without
a name or its ``}``) is kept as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .._errors import TemplateBuildError

_NAME = re.compile(r"[A-Za-z0-9_]+")
_OPERATORS = (":-", ":+", ":?", "-", "+", "?")


class _Unclosed(Exception):
    """A ``${`` whose ``}`` never comes: the reference is kept as text."""


def expand(value: str, env: Mapping[str, str]) -> str:
    """``value`` with its references substituted from ``env``; raises
    ``TemplateBuildError`` for a ``${NAME:?word}`` whose NAME is unset."""
    text, _ = _scan(value, 0, env, inside_braces=False)
    return text


def _scan(text: str, pos: int, env: Mapping[str, str], *, inside_braces: bool
          ) -> tuple[str, int]:
    """Substitute from ``pos`` to the end, or to the ``}`` closing a word (then the
    position after it)."""
    out: list[str] = []
    while pos < len(text):
        char = text[pos]
        if inside_braces and char == "}":
            return "".join(out), pos + 1
        if char == "\\" and text.startswith("$", pos + 1):
            out.append("$")
            pos += 2
        elif char == "$":
            piece, pos = _reference(text, pos, env)
            out.append(piece)
        else:
            out.append(char)
            pos += 1
    if inside_braces:
        raise _Unclosed
    return "".join(out), pos


def _reference(text: str, pos: int, env: Mapping[str, str]) -> tuple[str, int]:
    """The substitution of the reference at ``text[pos] == "$"`` and the position after it."""
    braced = text.startswith("{", pos + 1)
    name = _NAME.match(text, pos + (2 if braced else 1))
    if name is None:
        return "$", pos + 1
    if not braced:
        return env.get(name.group(0), ""), name.end()
    after = name.end()
    if text.startswith("}", after):
        return env.get(name.group(0), ""), after + 1
    operator = next((op for op in _OPERATORS if text.startswith(op, after)), None)
    if operator is None:
        return "$", pos + 1
    try:
        word, end = _scan(text, after + len(operator), env, inside_braces=True)
    except _Unclosed:
        return "$", pos + 1
    value = env.get(name.group(0))
    # The colon forms treat an empty value as unset, as the shell does.
    present = value is not None and (value != "" or not operator.startswith(":"))
    kind = operator[-1]
    if kind == "-":
        return (value if present and value is not None else word), end
    if kind == "+":
        return (word if present else ""), end
    if not present:
        raise TemplateBuildError(f"ENV: {name.group(0)}: {word or 'is not set'}")
    return value or "", end
