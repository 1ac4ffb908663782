"""Template names, tags and identifiers: what a valid one looks like, and parsing
``name:tag`` references.

Names are unique within a team (two teams may each have an ``app``); a reference without a
tag means the ``default`` tag, which is also the tag a build takes when none is given.
"""

from __future__ import annotations

import re
import secrets
import string
import uuid

from ..errors import InvalidRequest

DEFAULT_TAG = "default"
MAX_TAGS = 20
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,126}[A-Za-z0-9])?"
_NAME = re.compile(rf"^{_PART}$")
_TAG = re.compile(rf"^{_PART}$")
_ALPHABET = string.ascii_lowercase + string.digits
TEMPLATE_ID_LENGTH = 20


def new_template_id() -> str:
    """``[a-z0-9]{20}``, like E2B's template ids."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(TEMPLATE_ID_LENGTH))


def new_build_id() -> str:
    """A UUID: the official SDK parses build ids as one."""
    return str(uuid.uuid4())


def split_ref(ref: str) -> tuple[str, str | None]:
    """``name[:tag]`` → (name, tag or None). No validation."""
    name, sep, tag = ref.rpartition(":")
    return (name, tag) if sep else (ref, None)


def check_name(name: str, what: str = "name") -> str:
    if not _NAME.match(name):
        raise InvalidRequest(
            f"{what} {name[:80]!r} is not a valid template name: 1-128 letters, digits, "
            "'.', '_' or '-', starting and ending with a letter or digit")
    return name


def check_tag(tag: str) -> str:
    if not _TAG.match(tag):
        raise InvalidRequest(
            f"tag {tag[:80]!r} is not valid: 1-128 letters, digits, '.', '_' or '-', "
            "starting and ending with a letter or digit")
    return tag


def check_tags(tags: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    if len(tags) > MAX_TAGS:
        raise InvalidRequest(f"at most {MAX_TAGS} tags, got {len(tags)}")
    return tuple(dict.fromkeys(check_tag(t) for t in tags))


def parse_build_name(ref: str) -> tuple[str, str | None]:
    """The ``name`` of ``POST /v3/templates``: ``name`` or ``name:tag``, validated."""
    name, tag = split_ref(ref)
    return check_name(name), None if tag is None else check_tag(tag)
