"""The parts of a template recipe: where it starts (``FROM``) and its steps.

How a ``FROM`` value is read (:func:`classify_from`): a scheme prefix (``debian:``,
``oci:``, ``oci-archive:``, ``docker-archive:``, ``docker://``), a ``/`` (a registry path)
or an ``@`` (a digest), or ``scratch``, name an image; ``base`` and ``code-interpreter``
(with or without a tag) are Bac's built-in templates; any other bare ``name[:tag]`` is
decided at build time: a template if the server has one by that name, else an image.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from typing import Literal

from bac._template._errors import DockerfileError, Origin

FromKind = Literal["template", "image", "auto"]
StepType = Literal["RUN", "COPY", "ENV", "WORKDIR", "USER"]
DEFAULT_BASE = "base"
BUILTIN_TEMPLATES = frozenset({"base", "code-interpreter", "code-interpreter-v1"})
IMAGE_PREFIXES = ("oci:", "oci-archive:", "docker-archive:", "docker://", "debian:")


def classify_from(ref: str) -> FromKind:
    """What a ``FROM`` value names: ``image`` (a scheme prefix such as ``debian:`` or
    ``oci-archive:``, a ``/`` or an ``@`` in it, or ``scratch``), ``template`` (a built-in
    template), or ``auto`` (a bare ``name[:tag]``: a template if the server has one by that
    name, else an image)."""
    if ref.startswith(IMAGE_PREFIXES) or "/" in ref or "@" in ref or ref == "scratch":
        return "image"
    if ref.partition(":")[0] in BUILTIN_TEMPLATES:
        return "template"
    return "auto"


@dataclass(frozen=True)
class BaseRef:
    """Where a template starts: another template, or an image."""

    ref: str
    kind: FromKind
    username: str | None = None
    password: str | None = None


@dataclass(frozen=True)
class TemplateStep:
    """One step of the E2B build API, and where it was written.

    ``user_step`` groups the steps sent for one step as written (the sources of one
    ``COPY``, an ``ADD`` of an archive); ``None`` marks bookkeeping nobody wrote (the
    Dockerfile's ``USER root``/``WORKDIR /`` and default user and directory), which a
    build does not show as steps (``_user_steps``)."""

    type: StepType
    args: tuple[str, ...]
    force: bool = False
    origin: Origin | None = None
    instruction: str | None = None  # the Dockerfile instruction it came from
    user_step: int | None = None

    def describe(self) -> str:
        return self.instruction or f"{self.type} {' '.join(a for a in self.args if a)}"


def check_source(src: str, origin: Origin | None = None) -> str:
    """A COPY source as a path relative to the context; reject ones that leave it."""
    clean = posixpath.normpath(src.replace(os.sep, "/"))
    if not src or clean == ".." or clean.startswith("../"):
        raise DockerfileError(f"COPY source {src!r} is outside the build context", origin)
    return clean
