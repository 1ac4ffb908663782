"""Templates: built, read-only root filesystems that sandboxes start from.

Public API::

    store = TemplateStore(data_dir)                 # default: $BAC_DATA_DIR or /var/lib/bac
    image = await store.ensure_base(progress=print) # builds once (~1 min), then instant
    image = await store.get("base")                 # TemplateImage or TemplateNotFound
"""

from ._builder import ProgressCallback
from ._errors import TemplateBuildError, TemplateError
from ._recipe import BASE_PACKAGES, Recipe, base_recipe
from ._store import TemplateStore

__all__ = [
    "BASE_PACKAGES",
    "ProgressCallback",
    "Recipe",
    "TemplateBuildError",
    "TemplateError",
    "TemplateStore",
    "base_recipe",
]
