"""A build as the store keeps it: the recipe asked for, minus the registry password, and the
config it ended with."""

from __future__ import annotations

import dataclasses
from typing import Any

from bac_server.templates import BuildRecipe, FromImage, FromTemplate, TemplateConfig


def secrets_of(recipe: BuildRecipe) -> tuple[str, ...]:
    """Values that must never be stored or shown (in logs, reasons, listings)."""
    source = recipe.source
    if isinstance(source, FromImage) and source.password:
        return (source.password,)
    return ()


def recipe_record(recipe: BuildRecipe) -> dict[str, Any]:
    source = recipe.source
    if isinstance(source, FromTemplate):
        origin: dict[str, Any] = {"fromTemplate": source.ref}
    else:
        origin = {"fromImage": source.ref}
        if source.username is not None:
            # SECURITY: the password is used for the pull and then forgotten; never stored.
            origin["registryUser"] = source.username
    return {
        **origin,
        "steps": [{"type": type(step).__name__.removesuffix("Step").upper(),
                   **dataclasses.asdict(step)} for step in recipe.steps],
        "startCmd": recipe.start_cmd,
        "readyCmd": recipe.ready_cmd,
        "force": recipe.force,
    }


def config_record(config: TemplateConfig) -> dict[str, Any]:
    return {"user": config.user, "workdir": config.workdir,
            "env": [list(pair) for pair in config.env], "startCmd": config.start_cmd,
            "readyCmd": config.ready_cmd}
