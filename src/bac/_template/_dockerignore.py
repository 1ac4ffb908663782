"""``.dockerignore``: which files of a build context COPY never sees.

Moby's PatternMatcher decides (as e2b-dockerfile-utils ports it), with Docker's rules: one
pattern a line, a line starting with ``#`` a comment, blank lines skipped; patterns are
relative to the context root (a leading ``/`` is dropped) and cleaned; ``*`` and ``?``
match within one path segment, ``**`` any number of segments, ``[a-z]`` a class
(``[^a-z]`` its complement), ``\\`` escapes; a pattern that matches a directory excludes
everything under it; ``!pattern`` re-includes, and the last pattern that matches decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from e2b_dockerfile_utils import PatternMatcher

from bac._errors import InvalidArgumentError


class IgnoreRules:
    """Compiled ignore patterns; :meth:`ignored` answers for a context-relative path."""

    def __init__(self, patterns: Iterable[str]) -> None:
        try:
            self._matcher = PatternMatcher(list(patterns))
        except ValueError as exc:  # a malformed pattern: `[abc`, a lone `!`
            raise InvalidArgumentError(str(exc)) from exc

    def ignored(self, path: str) -> bool:
        """True when ``path`` (posix, relative to the context) is excluded."""
        return path not in ("", ".") and self._matcher.matches(path)

    def may_keep_under(self, directory: str) -> bool:
        """True when an exception (``!pattern``) may re-include something under the
        excluded ``directory``, which must then be walked."""
        return self._matcher.may_match_under(directory)


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
