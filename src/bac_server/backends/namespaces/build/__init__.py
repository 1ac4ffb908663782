"""Template build steps: one command each, in a short-lived slot isolated like a sandbox.

* ``_step``: ``run_build_step``, the step's life: checked, laid out, run, torn down.
* ``_files``: the step's layer, binds and the stubs the runtime makes; ``_user``: who the
  step runs as, from its own /etc; ``_spawn``: its OCI config and start; ``_output``: its
  output as lines.
"""

from ._step import run_build_step

__all__ = ["run_build_step"]
