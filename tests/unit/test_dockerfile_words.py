"""Dockerfile words: quotes, escapes, substitution and flags, as Docker's shell lexer does."""

from __future__ import annotations

import pytest

from bac._template._dockerfile._lines import read_dockerfile
from bac._template._dockerfile._words import (
    WordError,
    json_array,
    process_word,
    process_words,
    split_flags,
)

ENV = {"A": "1", "SP": "x  y", "EMPTY": ""}


@pytest.mark.parametrize(("text", "words"), [
    ("a b\tc", ["a", "b", "c"]),
    ("'a b' \"c d\"", ["a b", "c d"]),
    ("a\\ b", ["a b"]),
    ("'$A' \"$A\" $A", ["$A", "1", "1"]),
    ('"a\\"b" "c\\d" "\\$A"', ['a"b', "c\\d", "$A"]),
    ("pre$A.post ${A}x", ["pre1.post", "1x"]),
    ("$SP", ["x", "y"]),
    ('"$SP"', ["x  y"]),
    ("a$SP", ["ax", "y"]),
    ("$EMPTY b", ["b"]),
    ('"" b', ["", "b"]),
    ("cost$ 5$", ["cost$", "5$"]),
    ("$NOPE.x", [".x"]),
])
def test_process_words(text: str, words: list[str]) -> None:
    """Words split at unquoted blanks, also inside unquoted substitutions."""
    assert process_words(text, "\\", ENV) == words


def test_backtick_escape() -> None:
    """With `# escape=`` a backslash is an ordinary character and the backtick escapes."""
    assert process_words("C:\\dir `$A a` b", "`", ENV) == ["C:\\dir", "$A", "a b"]


def test_unknown_names_kept_for_the_build() -> None:
    """keep_unknown leaves undeclared references as written, declared ones substituted."""
    assert process_word("$PATH:${HOME:-/root}:$A", "\\", ENV, keep_unknown=True) == (
        "$PATH:${HOME:-/root}:1")
    assert process_word("$PATH:$A", "\\", ENV) == ":1"


def test_literal_dollars_escaped_for_the_build() -> None:
    """With keep_unknown, a $ made literal by quotes or escapes goes out as \\$, which the
    build's substitution turns back into a plain $."""
    assert process_word("'$A' \\$B \"\\$C\" 5$", "\\", ENV, keep_unknown=True) == (
        "\\$A \\$B \\$C 5\\$")


def test_nested_substitution_words() -> None:
    """The word of a modifier is itself expanded and unquoted."""
    assert process_word("${NOPE:-$A-'q x'}", "\\", ENV) == "1-q x"
    assert process_word("${A:+\"$A$A\"}", "\\", ENV) == "11"


@pytest.mark.parametrize("text", ["'open", '"open', "${A", "${", "${A%x}", "${!A}"])
def test_malformed_words(text: str) -> None:
    """Unterminated quotes and substitutions, and unsupported modifiers, are errors."""
    with pytest.raises(WordError):
        process_word(text, "\\", ENV)


def test_required_variables() -> None:
    """${V:?msg} fails when V is unset or empty; ${V?msg} only when unset."""
    with pytest.raises(WordError, match="EMPTY: needed"):
        process_word("${EMPTY:?needed}", "\\", ENV)
    assert process_word("${EMPTY?needed}", "\\", ENV) == ""
    with pytest.raises(WordError, match="NOPE: is not set"):
        process_word("${NOPE?}", "\\", ENV)


def test_flags_and_json() -> None:
    """Leading --flags split off; the exec form is a JSON list of strings or nothing."""
    assert split_flags("--chown=a:b --link src dst") == (
        [("chown", "a:b"), ("link", None)], "src dst")
    assert split_flags("src --chown=x") == ([], "src --chown=x")
    assert json_array('["a", "b c"]') == ["a", "b c"]
    assert json_array('["a", 1]') is None
    assert json_array("[oops") is None
    assert json_array("echo [x]") is None


def test_reader_keeps_line_numbers_and_skips_comments() -> None:
    """Instructions carry the line they start on across comments, blanks and
    continuations; a BOM and CRLF line ends are accepted."""
    text = "\ufeff# c\r\nFROM base\r\n\r\nRUN a \\\r\n  # inner\r\n  b\r\nrun c\r\n"
    doc = read_dockerfile(text)
    assert [(i.name, i.rest, i.origin.line) for i in doc.instructions] == [
        ("FROM", "base", 2), ("RUN", "a   b", 4), ("RUN", "c", 7)]


def test_continuation_at_end_of_file() -> None:
    """A trailing escape at the very end ends the instruction instead of failing."""
    doc = read_dockerfile("FROM base\nRUN a \\\n")
    assert doc.instructions[-1].rest == "a"
