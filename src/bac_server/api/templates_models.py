"""Request bodies of the template API as strict pydantic models, keys exactly as on the wire
(E2B's ``TemplateBuildRequestV3``, ``TemplateBuildStartV2``, tag requests, updates).

Every key the official SDK sends is listed (``forceUpload``, ``resolveSymlinks`` and ``gzip``
of a step are client-side upload options, accepted and ignored); any other key is a 400.
"""

from __future__ import annotations

from typing import Any

from pydantic import StrictBool, StrictInt, StrictStr

from bac_server.api.body import Name, Strict


class TemplateBuildRequest(Strict):
    """``POST /v3/templates``."""

    name: Name | None = None
    tags: list[StrictStr] | None = None
    alias: Name | None = None  # deprecated spelling of ``name``
    teamID: StrictStr | None = None
    cpuCount: StrictInt | None = None
    memoryMB: StrictInt | None = None
    minFreeDiskMb: StrictInt | None = None


class BuildStepBody(Strict):
    type: StrictStr
    args: list[StrictStr] | None = None
    filesHash: StrictStr | None = None
    force: StrictBool | None = None
    forceUpload: StrictBool | None = None
    resolveSymlinks: StrictBool | None = None
    gzip: StrictBool | None = None


class TemplateBuildStart(Strict):
    """``POST /v2/templates/{templateID}/builds/{buildID}``."""

    fromImage: StrictStr | None = None
    fromTemplate: StrictStr | None = None
    fromImageRegistry: dict[str, Any] | None = None
    force: StrictBool | None = None
    steps: list[BuildStepBody] | None = None
    startCmd: StrictStr | None = None
    readyCmd: StrictStr | None = None


class AssignTags(Strict):
    """``POST /templates/tags``: point ``tags`` at the build ``target`` (``name:tag``) is."""

    target: Name
    tags: list[StrictStr]


class DeleteTags(Strict):
    """``DELETE /templates/tags``."""

    name: Name
    tags: list[StrictStr]


class TemplateUpdate(Strict):
    """``PATCH /templates/{templateID}`` and ``PATCH /v2/templates/{templateID}``."""

    public: StrictBool | None = None
