"""The `base-full` template: base plus the tools agents reach for that base leaves out.

`base` stays lean (it is what every sandbox starts from, and what a create restores);
`base-full` adds what E2B's base image ships and an agent's first commands assume: a C
and C++ tool chain with make (`build-essential`: native wheels, `./configure && make`),
Node.js with npm, jq and vim. Debian's `npm` package pulls in hundreds of node modules
as separate packages, so npm is installed the way npm installs itself, into
`/usr/local` with the host's npm.

It runs no service: a plain sandbox, like base. Built on request (`python -m
bac_server.prepare --template base-full`, or `scripts/setup --template base-full`), not by
default: it costs a few hundred MB and a couple of minutes once.
"""

from __future__ import annotations

from ._code_interpreter import LayerRecipe

BASE_FULL = LayerRecipe(
    name="base-full",
    aliases=(),
    parent="base",
    debian_packages=("build-essential", "jq", "nodejs", "pkg-config", "vim"),
    pypi_packages=(),
    npm_global_packages=("npm",),
    guest_packages=(),
    start=None,
)
