"""The images a build starts FROM, imported as whole root filesystems in the sandbox ids.

* ``_materialize``: ``materialize_image``, the one way in: the reference parsed, the
  image found in the cache or imported, once, under its entry's lock.
* ``_refs``: what a FROM names (``debian:<suite>``, an OCI layout or archive on disk,
  a registry image) and the directories local paths are confined to.
* ``_debian``: ``debian:<suite>[-slim]``, built from Debian's archive as ``base`` is.
* ``_registries``: ``RegistryAccess``, the registries a build may reach (none on this
  machine or a private network unless the operator allows it, ``BAC_REGISTRY_ALLOW``).
* ``_skopeo``: registries and archives copied into a private OCI layout by skopeo.
* ``_oci``: that layout read (manifest, config, platform) and unpacked by umoci, rootless.
* ``_cache``: ``<data_dir>/images``: one entry per digest, published by one rename, and
  the digest each registry tag last resolved to.
* ``_tools``: the image tools run cancellation-safe, their failures in the user's terms.
* ``_model``: what an import yields (``ImportedImage``, ``ImageConfig``) and
  ``ImageError`` with its ``ImageErrorKind``.
"""

from ._cache import METADATA
from ._materialize import materialize_image
from ._model import ImageConfig, ImageError, ImageErrorKind, ImportedImage
from ._refs import image_import_dir
from ._registries import RegistryAccess

__all__ = [
    "METADATA",
    "ImageConfig",
    "ImageError",
    "ImageErrorKind",
    "ImportedImage",
    "RegistryAccess",
    "image_import_dir",
    "materialize_image",
]
