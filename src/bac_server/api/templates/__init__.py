"""E2B's template API: a team's templates, their builds, the files a build copies in, and
their names and tags.

* ``_catalog``: the templates: request a build (``POST /v3/templates``), list, get, change
  visibility, delete.
* ``_builds``: a template's builds: start one, its status and its logs (also live), cancel.
* ``_recipe``: the body that starts a build, turned into a ``BuildRecipe``.
* ``_files``: the build-context upload cache (a signed upload link, the upload).
* ``_tags``: a name looked up, tags assigned and removed, a template's tags.
"""

from ._builds import build_logs, build_status, cancel_build, start_build
from ._catalog import (
    delete_template,
    get_template,
    list_templates_v1,
    list_templates_v2,
    request_build,
    update_template,
)
from ._files import upload_files, upload_link
from ._recipe import TemplateBuildStart, to_recipe
from ._tags import assign_tags, get_alias, list_tags, remove_tags

__all__ = [
    "TemplateBuildStart",
    "assign_tags",
    "build_logs",
    "build_status",
    "cancel_build",
    "delete_template",
    "get_alias",
    "get_template",
    "list_tags",
    "list_templates_v1",
    "list_templates_v2",
    "remove_tags",
    "request_build",
    "start_build",
    "to_recipe",
    "update_template",
    "upload_files",
    "upload_link",
]
