"""Dockerfile words and lines at Bac's boundary with BuildKit's lexer and parser
(e2b-dockerfile-utils): substitution, what ENV leaves for the build, flags, the reader."""

from __future__ import annotations

import pytest

from bac import DockerfileError
from bac._template._dockerfile._syntax import read_dockerfile
from bac._template._dockerfile._words import (
    WordError,
    defer,
    expand,
    expand_words,
    split_flag,
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
def test_expand_words(text: str, words: list[str]) -> None:
    """Words split at unquoted blanks, also inside unquoted substitutions; an undeclared
    name is empty."""
    assert expand_words(text, "\\", ENV) == words


def test_backtick_escape() -> None:
    """With `# escape=`` a backslash is an ordinary character and the backtick escapes."""
    assert expand_words("C:\\dir `$A a` b", "`", ENV) == ["C:\\dir", "$A", "a b"]


def test_nested_substitution_words() -> None:
    """The word of a modifier is itself expanded and unquoted."""
    assert expand("${NOPE:-$A-'q x'}", "\\", ENV) == "1-q x"
    assert expand("${A:+\"$A$A\"}", "\\", ENV) == "11"


@pytest.mark.parametrize("text", ["'open", '"open', "${A", "${", "${}", "${A:x}", "${!A}"])
def test_malformed_words(text: str) -> None:
    """Unterminated quotes and substitutions, and unsupported modifiers, are errors."""
    with pytest.raises(WordError):
        expand(text, "\\", ENV)


def test_required_variables() -> None:
    """${V:?msg} fails when V is unset or empty; ${V?msg} only when unset."""
    with pytest.raises(WordError, match="EMPTY: needed"):
        expand("${EMPTY:?needed}", "\\", ENV)
    assert expand("${EMPTY?needed}", "\\", ENV) == ""
    with pytest.raises(WordError, match="NOPE: is not allowed to be unset"):
        expand("${NOPE?}", "\\", ENV)


def test_defer_keeps_undeclared_names_for_the_build() -> None:
    """ENV values: declared names substituted, undeclared references left as written (their
    words unquoted), the pattern forms only for declared names."""
    assert defer("$PATH:${HOME:-/root}:$A", "\\", ENV, {}) == "$PATH:${HOME:-/root}:1"
    assert defer("${HOME:-'a b'}", "\\", {}, {}) == "${HOME:-a b}"
    assert defer("${A#1}x", "\\", ENV, {}) == "x"
    with pytest.raises(WordError, match=r"unsupported substitution \$\{HOME%\.\.\.\}"):
        defer("${HOME%/}", "\\", ENV, {})


def test_defer_escapes_literal_dollars() -> None:
    """A $ made literal by quotes or escapes, a $ before no name, and the $ of a value as
    written go out as \\$ (the build turns it back into a plain $); values already sent
    go in as they are."""
    assert defer("'$A' \\$B \"\\$C\" $\"D\" 5$", "\\", ENV, {}) == "\\$A \\$B \\$C \\$D 5\\$"
    assert defer("$X$Y", "\\", {"X": "$p"}, {"Y": "\\$q:$PATH"}) == "\\$p\\$q:$PATH"
    assert defer("`$A", "`", ENV, {}) == "\\$A"


def test_flags() -> None:
    """A builder flag's name, and its value (None without =)."""
    assert split_flag("--chown=a:b") == ("chown", "a:b")
    assert split_flag("--mount=type=cache,target=/x") == ("mount", "type=cache,target=/x")
    assert split_flag("--link") == ("link", None)
    assert split_flag("--chown=") == ("chown", "")


def read(text: str) -> list[tuple[str, list[str], int]]:
    doc = read_dockerfile(text, "Dockerfile", ["FROM", "RUN"])
    return [(i.name, i.args, i.start_line) for i in doc.instructions]


def test_reader_keeps_line_numbers_and_skips_comments() -> None:
    """Instructions carry the line they start on across comments, blanks and
    continuations; a BOM and CRLF line ends are accepted."""
    text = "\ufeff# c\r\nFROM base\r\n\r\nRUN a \\\r\n  # inner\r\n  b\r\nrun c\r\n"
    assert read(text) == [("FROM", ["base"], 2), ("RUN", ["a   b"], 4), ("RUN", ["c"], 7)]


def test_continuation_at_end_of_file() -> None:
    """A trailing escape at the very end ends the instruction instead of failing."""
    assert read("FROM base\nRUN a \\\n")[-1] == ("RUN", ["a"], 2)


@pytest.mark.parametrize(("text", "message"), [
    ("FROM base\nRUN x\nRUNN y\n", "Dockerfile:3: unknown instruction 'RUNN' (did you mean RUN?)"),
    ("FROM base\nRUN cat <<EOF\nno end\n",
     "Dockerfile:2: heredoc <<EOF is never terminated (expected a line 'EOF')"),
    ("FROM base\nRUN cat <<A <<-B\nA\n\tA\n",
     "Dockerfile:2: heredoc <<B is never terminated (expected a line 'B')"),
    # The marker on a continued line: BuildKit's words alone.
    ("FROM base\nRUN cat \\\n <<EOF\nx\n", "Dockerfile:2: unterminated heredoc"),
    ("# escape=`\n# escape=`\n", "Dockerfile:2: only one escape parser directive can be used"),
])
def test_reader_errors(text: str, message: str) -> None:
    """The parser's errors are located; an unknown instruction names the nearest known one,
    an unterminated heredoc the line it waits for."""
    with pytest.raises(DockerfileError) as caught:
        read(text)
    assert str(caught.value) == message
