"""Templates: built, read-only root filesystems that sandboxes start from.

Public API::

    store = TemplateStore(data_dir)                 # default: $BAC_DATA_DIR or /var/lib/bac
    image = await store.ensure_base(progress=print) # builds once (~1 min), then instant
    image = await store.get("base")                 # TemplateImage or TemplateNotFound

    engine = BuildEngine(store, backend)            # backend: a backends.base.Builder
    built = await engine.build(recipe, files=..., resolve_template=..., log=...)
    image = await store.built(built.digest, "my-template")

    collector = StorageCollector(store, data_dir=data_dir, grace_s=900)
    report = await collector.collect(LiveRefs(digests, paths), dry_run=True)

Parts (each built only on those after it): ``build`` (the engine), ``gc`` (collecting
storage), ``_store`` (``TemplateStore``), ``images`` (FROM images), ``builtin`` (``base``
and the templates derived from it), ``layers`` (the layer store and the manifests); all
of them speak the recipe model of ``_steps`` and raise the errors of ``_errors``.
"""

from ._errors import (
    BaseNotFoundError,
    DiskFullError,
    StepFailed,
    TemplateBuildError,
    TemplateError,
)
from ._steps import (
    BuildRecipe,
    CopyStep,
    EnvStep,
    FromImage,
    FromTemplate,
    LogEntry,
    LogLevel,
    RunStep,
    Step,
    TemplateConfig,
    UserStep,
    WorkdirStep,
)
from ._store import TemplateStore
from .build import BuildEngine, FilesLookup, LogCallback, ResolveTemplate, TemplateNames
from .builtin import BASE_PACKAGES, LAYERS, ProgressCallback, Recipe, base_recipe
from .gc import CollectionRefused, Freed, LiveRefs, StorageCollector, StorageReport
from .images import (
    ImageConfig,
    ImageError,
    ImageErrorKind,
    ImportedImage,
    RegistryAccess,
    image_import_dir,
    materialize_image,
)
from .layers import BuiltTemplate

__all__ = [
    "BASE_PACKAGES",
    "LAYERS",
    "BaseNotFoundError",
    "BuildEngine",
    "BuildRecipe",
    "BuiltTemplate",
    "CollectionRefused",
    "CopyStep",
    "DiskFullError",
    "EnvStep",
    "FilesLookup",
    "Freed",
    "FromImage",
    "FromTemplate",
    "ImageConfig",
    "ImageError",
    "ImageErrorKind",
    "ImportedImage",
    "LiveRefs",
    "LogCallback",
    "LogEntry",
    "LogLevel",
    "ProgressCallback",
    "Recipe",
    "RegistryAccess",
    "ResolveTemplate",
    "RunStep",
    "Step",
    "StepFailed",
    "StorageCollector",
    "StorageReport",
    "TemplateBuildError",
    "TemplateConfig",
    "TemplateError",
    "TemplateNames",
    "TemplateStore",
    "UserStep",
    "WorkdirStep",
    "base_recipe",
    "image_import_dir",
    "materialize_image",
]
