"""Refuse a recipe that cannot build before anything runs; the message names the step.

The backend checks again what reaches it (paths, environment, users); these checks exist
so that a typo fails in milliseconds, with the step's number, not after minutes of
earlier steps.
"""

from __future__ import annotations

import re

from .._errors import TemplateBuildError
from .._steps import BuildRecipe, CopyStep, EnvStep, RunStep, UserStep, WorkdirStep
from ._finalize import check_user
from ._state import describe

_ENV_NAME = re.compile(r"[^=\0]+")


def validate(recipe: BuildRecipe) -> None:
    """Refuse a recipe that cannot build, before anything runs (the message names the step)."""
    for index, step in enumerate(recipe.steps, 1):
        where = f"step {index} ({describe(step)})"
        if isinstance(step, RunStep) and not step.command.strip():
            raise TemplateBuildError(f"{where}: the command is empty")
        if isinstance(step, (RunStep, CopyStep)) and step.user:
            check_user(step.user, where)
        if isinstance(step, UserStep):
            check_user(step.user, where)
        if isinstance(step, CopyStep):
            if not step.src.strip() or not step.dest.strip():
                raise TemplateBuildError(f"{where}: source and destination are required")
            if step.mode is not None and not 0 <= step.mode <= 0o7777:
                raise TemplateBuildError(f"{where}: mode {step.mode:o} is not a permission mode")
        if isinstance(step, WorkdirStep) and not step.path.strip():
            raise TemplateBuildError(f"{where}: the path is empty")
        if isinstance(step, EnvStep):
            bad = [name for name, value in step.values
                   if not _ENV_NAME.fullmatch(name) or "\0" in value]
            if bad:
                raise TemplateBuildError(f"{where}: invalid variable names {bad}")
    for name, command in (("start", recipe.start_cmd), ("ready", recipe.ready_cmd)):
        if command is not None and not command.strip():
            raise TemplateBuildError(f"the {name} command is empty")
