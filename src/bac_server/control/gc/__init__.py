"""Collecting what templates leave behind, in the control plane: passes in the background
(hourly, and soon after a template is deleted) that tell the template layer's collector
what something can still start from, and expire uploaded build contexts nobody used.

* ``_collection``: ``TemplateGc``, one pass and the passes in the background, and its
  ``GcReport``.
* ``_uploads``: the expiry of unused uploads and of files no row names.
"""

from ._collection import GcReport, GcSettings, TemplateGc
from ._uploads import ExpiredUpload

__all__ = ["ExpiredUpload", "GcReport", "GcSettings", "TemplateGc"]
