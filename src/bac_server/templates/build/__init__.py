"""The template build engine: a recipe's steps run into cached layers, then a manifest.

* ``_engine``: ``BuildEngine.build``, the entry: validation, the guard against a
  collection, and a failure's last log line.
* ``_run``: ``BuildRun``, one build: its source, each step in order, finalize, the
  manifest written last.
* ``_source``: where a build starts (``FROM`` a built template or an imported image);
  ``_missing_base``: a FROM that names nothing, said so with the names it may mean.
* ``_state``: the state steps run in (ENV, USER, WORKDIR) and each layer's cache key;
  ``_env`` expands ``$NAME`` references in ENV values.
* ``_runner``: ``StepRunner``: a layer found in the cache or made by a command in a
  build sandbox (``Builder.run_build_step``), its output sent to the build log.
* ``_copy``: COPY, over the upload unpacked into the build ``context``.
* ``_finalize``: the scripts that make the default user and fit an image for sandboxes.
* ``_validate``: a recipe that cannot build refused before anything runs.
* ``_squash``: chains past ``MAX_DEPTH`` layers merged into one rootfs.
"""

from ._engine import BuildEngine, FilesLookup
from ._missing_base import TemplateNames
from ._runner import LogCallback
from ._source import ResolveTemplate

__all__ = ["BuildEngine", "FilesLookup", "LogCallback", "ResolveTemplate", "TemplateNames"]
