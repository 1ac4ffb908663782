"""Validate real responses against spec/openapi.yaml (JSON Schema 2020-12 with formats)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import httpx
import yaml
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_PATH = Path(__file__).parents[3] / "spec" / "openapi.yaml"
_URI = "urn:bac:openapi"


@cache
def spec() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SPEC_PATH.read_text())
    return loaded


@cache
def _registry() -> Registry:
    resource = Resource.from_contents(spec(), default_specification=DRAFT202012)
    return Registry().with_resource(_URI, resource)


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def check(method: str, path: str, response: httpx.Response) -> None:
    """Assert the response's status is documented for the operation and its body matches."""
    operation = spec()["paths"][path][method.lower()]
    status = str(response.status_code)
    assert status in operation["responses"], (
        f"{method} {path}: status {status} is not in the spec ({response.text[:200]})"
    )
    documented = operation["responses"][status]
    pointer = f"/paths/{_escape(path)}/{method.lower()}/responses/{status}"
    if "$ref" in documented:
        pointer = documented["$ref"].removeprefix("#")
        documented = spec()["components"]["responses"][pointer.rsplit("/", 1)[-1]]
    content = documented.get("content", {})
    if not content:
        assert not response.content, f"{method} {path} {status}: unexpected body"
        return
    media = next(iter(content))
    if media != "application/json":
        return
    validator = Draft202012Validator(
        {"$ref": f"{_URI}#{pointer}/content/{_escape(media)}/schema"},
        registry=_registry(),
        format_checker=FormatChecker(),
    )
    errors = sorted(validator.iter_errors(response.json()), key=lambda e: list(e.path))
    assert not errors, f"{method} {path} {status}: " + "; ".join(
        f"{list(e.path)}: {e.message}" for e in errors[:5]
    )
