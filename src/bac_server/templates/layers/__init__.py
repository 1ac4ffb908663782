"""Layered templates on disk: the layers every template shares, and the manifests that
stack them over a root filesystem into a built template.

* ``_store``: ``LayerStore``, ``<data_dir>/layers/<key>``: each layer stored once,
  built under its key's lock (in this process and across processes), published by one
  rename; and ``digest``, the keys layers and built templates are named by.
* ``_manifest``: ``BuiltTemplate`` and ``<data_dir>/templates/manifests/<digest>.json``:
  which layers over which rootfs, and the config its sandboxes start with; written last
  by a build, read back into the ``TemplateImage`` a backend starts.
"""

from ._manifest import (
    BuiltTemplate,
    config_json,
    make_built,
    manifest_dir,
    read_manifest,
    template_image,
    write_manifest,
)
from ._store import LayerInfo, LayerStore, LayerWork, digest

__all__ = [
    "BuiltTemplate",
    "LayerInfo",
    "LayerStore",
    "LayerWork",
    "config_json",
    "digest",
    "make_built",
    "manifest_dir",
    "read_manifest",
    "template_image",
    "write_manifest",
]
