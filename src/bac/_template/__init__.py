"""Templates: recipes (``Template``, written in Python or read from a Dockerfile), the
build of a recipe on a server, and the team's templates (``AsyncTemplates``/``Templates``).

Layers, lowest first: the step model and its errors (``_steps``, ``_errors``) and the
steps as written over the steps sent, which is how builds are shown (``_user_steps``); the
Dockerfile converter, which makes steps (``_dockerfile/``); the recipe (``_recipe``,
whose ``from_dockerfile`` calls the converter); the build context a COPY sends
(``_dockerignore``, ``_files``); one build over E2B's template API and its logs
(``_build``, ``_logs``, ``_models``); the client and its blocking twin (``_client``,
``_sync``).
"""

from bac._template._build import LogCallback
from bac._template._client import AsyncTemplates
from bac._template._errors import DockerfileError, DockerfileWarning, TemplateBuildError
from bac._template._models import (
    BuildInfo,
    BuildLogEntry,
    BuildState,
    BuildStatus,
    TemplateBuild,
    TemplateInfo,
    TemplateTag,
)
from bac._template._recipe import Template
from bac._template._steps import BaseRef, FromKind, TemplateStep, classify_from
from bac._template._sync import Templates

__all__ = [
    "AsyncTemplates",
    "BaseRef",
    "BuildInfo",
    "BuildLogEntry",
    "BuildState",
    "BuildStatus",
    "DockerfileError",
    "DockerfileWarning",
    "FromKind",
    "LogCallback",
    "Template",
    "TemplateBuild",
    "TemplateBuildError",
    "TemplateInfo",
    "TemplateStep",
    "TemplateTag",
    "Templates",
    "classify_from",
]
