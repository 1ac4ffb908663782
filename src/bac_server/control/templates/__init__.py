"""A team's templates in the control plane: which exist, who may see them, which build a
reference names, the files their builds copy in, and the start snapshots of built ones.

* ``_catalog``: ``TemplateCatalog``, the templates, their builds and tags, and who may see
  what; the built-ins' names.
* ``_refs``: template names, tags and ids, and parsing ``name:tag``.
* ``_build_states``: a build's lifecycle (``BuildStatus`` and its transitions), which the
  catalog serves by (only a ready build holds a tag) and the build queue
  (:mod:`bac_server.control.builds`) moves through.
* ``_resolve``: ``TemplateResolver``, from a reference to the image a sandbox starts from
  (``Resolved``), and the pin of a sandbox to its build; the typed seams around it,
  ``TemplateSource`` (what sandboxes ask) and ``BuiltImages`` (what it asks of the disk).
* ``_uploads``: ``Uploads``, the build contexts a COPY uploaded, their signed URLs and
  each team's quota.
* ``_start_snapshots``: ``StartSnapshots``, the policy of start snapshots (when one is
  taken, which a create names, when one goes); ``_snapshot_records`` their records on disk.
"""

from ._build_states import UNFINISHED, BuildStatus, is_finished, sources_of
from ._catalog import (
    BUILTIN_MEMORY_MB,
    BUILTINS,
    TemplateCatalog,
    TemplateSummary,
    builtin_name,
)
from ._refs import DEFAULT_TAG, split_ref
from ._resolve import BuiltImages, Builtin, Resolved, TemplateResolver, TemplateSource
from ._snapshot_records import SnapshotRecords, StartSnapshot
from ._start_snapshots import StartSnapshots
from ._uploads import UploadQuota, UploadQuotaExceeded, Uploads, UploadTooLarge, check_hash

__all__ = [
    "BUILTINS",
    "BUILTIN_MEMORY_MB",
    "DEFAULT_TAG",
    "UNFINISHED",
    "BuildStatus",
    "BuiltImages",
    "Builtin",
    "Resolved",
    "SnapshotRecords",
    "StartSnapshot",
    "StartSnapshots",
    "TemplateCatalog",
    "TemplateResolver",
    "TemplateSource",
    "TemplateSummary",
    "UploadQuota",
    "UploadQuotaExceeded",
    "UploadTooLarge",
    "Uploads",
    "builtin_name",
    "check_hash",
    "is_finished",
    "sources_of",
    "split_ref",
]
