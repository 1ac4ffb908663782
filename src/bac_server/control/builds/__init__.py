"""Template builds in the control plane: the queue in front of the build engine, each
build's log on its way to the store, and what the store keeps of a build.

* ``_queue``: ``TemplateBuilds``, at most ``concurrency`` builds at once, each in a task of
  its own, from waiting to ready or error (``control.templates.BuildStatus``); cancels,
  recovery after a restart, and following a build's log live.
* ``_log``: ``BuildLog``, one build's log lines: numbered, bounded, redacted, batched.
* ``_recipe``: the recipe a build was asked for (without its registry password) and the
  config it ended with, as the store keeps them.
"""

from ._log import MAX_LINE_BYTES, MAX_LINES, BuildLog
from ._queue import STALE_AFTER_S, TemplateBuilds
from ._recipe import config_record, recipe_record, secrets_of

__all__ = [
    "MAX_LINES",
    "MAX_LINE_BYTES",
    "STALE_AFTER_S",
    "BuildLog",
    "TemplateBuilds",
    "config_record",
    "recipe_record",
    "secrets_of",
]
