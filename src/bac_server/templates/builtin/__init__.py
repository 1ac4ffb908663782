"""The built-in templates, built on the host at set-up rather than from a recipe's steps.

* ``_recipe``: what ``base`` is made of (``Recipe``, ``base_recipe``): Debian minbase with
  E2B's packages and user; its digest names the build.
* ``_rootfs``: a Debian rootfs built from a ``Recipe`` with mmdebstrap, shifted to the
  sandbox ids and published by one rename (``base``, and ``debian:<suite>`` images).
* ``_derived``: the built-ins derived from another (``LAYERS``), found by name or alias,
  each built on a copy of its parent's rootfs in a chroot.
* ``_code_interpreter``: the ``code-interpreter`` template's contents and start command.
* ``_desktop``: the ``desktop`` template's (Xvfb, XFCE, x11vnc, noVNC; the SDK's shims).
* ``_base_full``: ``base-full``, base plus a C tool chain, Node.js and npm, jq and vim
  (built on request).
"""

from ._code_interpreter import LayerRecipe
from ._derived import LAYERS, build_layer, find_layer, layer_digest
from ._recipe import BASE_ALIASES, BASE_PACKAGES, DPKG_EXCLUDES, Recipe, base_recipe
from ._rootfs import METADATA_FILE, ProgressCallback, build_rootfs

__all__ = [
    "BASE_ALIASES",
    "BASE_PACKAGES",
    "DPKG_EXCLUDES",
    "LAYERS",
    "METADATA_FILE",
    "LayerRecipe",
    "ProgressCallback",
    "Recipe",
    "base_recipe",
    "build_layer",
    "build_rootfs",
    "find_layer",
    "layer_digest",
]
