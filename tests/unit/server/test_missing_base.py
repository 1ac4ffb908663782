"""A FROM naming nothing fails as such, with the template names it may have meant; an
unreachable registry is named, and for a Docker Hub name so is BAC_REGISTRY_MIRROR."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from bac_server.templates import BaseNotFoundError, ImageError, ImageErrorKind
from bac_server.templates.build._missing_base import (
    could_be_template,
    no_image,
    no_template,
    suggestions,
)
from bac_server.templates.images._materialize import _mirror_hint
from bac_server.templates.images._refs import RegistryImage, parse_image_ref

NAMES = ["base", "code-interpreter", "code-interpreter-v1", "desktop", "my-app", "web-api"]


async def names() -> Sequence[str]:
    return NAMES


@pytest.mark.parametrize(("ref", "expected"), [
    ("nosuchbase", ["base"]),
    ("my-ap", ["my-app"]),
    ("web-app:v2", ["web-api", "my-app"]),
    ("code-interpeter", ["code-interpreter", "code-interpreter-v1"]),
    ("zzz", []),
    ("my-app:v2", []),
])
def test_suggestions_are_the_closest_names(ref: str, expected: list[str]) -> None:
    """Close spellings first, then names the reference contains (a tag is not compared;
    the name itself is no suggestion)."""
    assert suggestions(ref, NAMES) == expected


@pytest.mark.parametrize(("ref", "shaped"), [
    ("nosuchbase", True), ("python:3.12", True), ("my_app.v2", True),
    ("team/app", False), ("registry.local:5000/app:1", False), ("python@sha256:ab", False),
    ("debian:bookworm", False), ("oci:/srv/app", False), ("scratch", False)])
def test_what_could_be_a_template_name(ref: str, shaped: bool) -> None:
    """`name` and `name:tag` could be templates; paths, digests and image schemes not."""
    assert could_be_template(ref) is shaped


async def test_a_missing_image_with_a_templates_shape_is_no_template_or_image() -> None:
    """Not found, or refused without credentials (Docker Hub's answer for a repository
    that does not exist): the build says no template or image has that name."""
    for kind in (ImageErrorKind.NOT_FOUND, ImageErrorKind.UNAUTHORIZED):
        error = await no_image("nosuchbase", ImageError("image not found: ...", kind), names,
                               anonymous=True)
        assert isinstance(error, BaseNotFoundError)
        assert str(error) == "no template or image named 'nosuchbase' (did you mean 'base'?)"
    assert str(await no_image("zzz:1", ImageError("x", ImageErrorKind.NOT_FOUND), names,
                              anonymous=True)) == "no template or image named 'zzz:1'"
    # With credentials, a refusal is about them: the registry's error says it best.
    assert await no_image("nosuchbase", ImageError("x", ImageErrorKind.UNAUTHORIZED), names,
                          anonymous=False) is None


async def test_an_unreachable_registry_is_named_only_for_an_image_reference() -> None:
    """Out of reach: a bare name is still no template or image (the registry not reached
    is said); `name:tag` and registry paths keep the registry's own error."""
    down = ImageError("nosuchbase: registry docker.io unreachable: its name does not resolve",
                      ImageErrorKind.UNREACHABLE, "docker.io")
    error = await no_image("nosuchbase", down, names, anonymous=True)
    assert str(error) == ("no template or image named 'nosuchbase' (did you mean 'base'?); "
                          "docker.io could not be reached to look for an image")
    assert "BAC_REGISTRY_MIRROR" not in str(error)
    for ref in ("python:3.12", "registry.local:5000/team/app:1"):
        assert await no_image(ref, down, names, anonymous=True) is None
    assert await no_image("team/app", ImageError("x", ImageErrorKind.NOT_FOUND), names,
                          anonymous=True) is None


async def test_a_missing_template_is_named_with_suggestions() -> None:
    """fromTemplate naming no template: `no template named`, with the close ones."""
    assert str(await no_template("my-ap", names)) == (
        "no template named 'my-ap' (did you mean 'my-app'?)")
    assert str(await no_template("my-ap", None)) == "no template named 'my-ap'"


def test_mirror_hint_for_docker_hub_names_only() -> None:
    """An unreachable Docker Hub says how to use a mirror; an unreachable mirror says it is
    the one BAC_REGISTRY_MIRROR names; another registry gets no hint."""
    def registry(ref: str, mirror: str | None = None) -> RegistryImage:
        parsed = parse_image_ref(ref, mirror)
        assert isinstance(parsed, RegistryImage)
        return parsed

    hub = _mirror_hint(registry("python:3.12"), "python:3.12", None)
    assert "BAC_REGISTRY_MIRROR=host:port" in hub and "docs/templates.md" in hub
    mirrored = _mirror_hint(registry("python:3.12", "mirror.local:5000"), "python:3.12",
                            "mirror.local:5000")
    assert mirrored == " (it is the mirror BAC_REGISTRY_MIRROR names for Docker Hub)"
    assert _mirror_hint(registry("registry.local:5000/app:1", "mirror.local:5000"),
                        "registry.local:5000/app:1", "mirror.local:5000") == ""
