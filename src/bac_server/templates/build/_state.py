"""The state build steps run in, and the cache keys of the layers they make.

ENV, WORKDIR and USER change no file; they change the state later steps run in, so the
state is part of every layer's key. A layer's key is the sha256 of its parent's key, the
step's canonical form (``force`` left out) and that state, so a key names one exact
result: the same key is the same layer, whichever template asked for it.

``workdir`` None means "the user's home" (E2B: after ``set_user("guest")`` commands run in
``/home/guest`` unless a WORKDIR was set); the home is learnt when the user is ensured.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace

from .._steps import CopyStep, EnvStep, RunStep, Step, UserStep, WorkdirStep
from ..layers import digest
from ._env import expand

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class BuildState:
    env: tuple[tuple[str, str], ...] = ()
    user: str = "root"
    workdir: str | None = None  # None: the user's home
    home: str = "/root"  # home of ``user`` in the image
    user_set: bool = False  # a USER step of this recipe chose ``user``

    @property
    def cwd(self) -> str:
        return self.workdir or self.home

    def with_env(self, values: tuple[tuple[str, str], ...]) -> BuildState:
        merged = dict(self.env)
        for name, value in values:
            # Images without a PATH still run with the default one: $PATH extends that.
            expanded = expand(value, {"PATH": DEFAULT_PATH, **merged})
            merged.pop(name, None)  # a re-set variable moves to the end, as in Docker
            merged[name] = expanded
        return replace(self, env=tuple(merged.items()))

    def with_workdir(self, path: str) -> BuildState:
        return replace(self, workdir=posixpath.normpath(posixpath.join(self.cwd, path)))

    def with_user(self, user: str, home: str) -> BuildState:
        return replace(self, user=user, home=home, user_set=True)

    def step_env(self) -> tuple[tuple[str, str], ...]:
        """The environment a step's command gets: the state's, with a PATH always set."""
        if any(name == "PATH" for name, _ in self.env):
            return self.env
        return (("PATH", DEFAULT_PATH), *self.env)

    def key_part(self) -> dict[str, object]:
        return {"env": [list(pair) for pair in self.env], "user": self.user,
                "cwd": self.cwd}


def canonical(step: Step) -> dict[str, object]:
    """What of a step shapes its layer (``force`` does not)."""
    if isinstance(step, RunStep):
        return {"run": step.command, "user": step.user}
    if isinstance(step, CopyStep):
        return {"copy": step.src, "dest": step.dest, "files": step.files_hash,
                "user": step.user, "mode": step.mode}
    if isinstance(step, UserStep):
        return {"user": step.user}
    if isinstance(step, EnvStep):
        return {"env": [list(pair) for pair in step.values]}
    return {"workdir": step.path}


def step_key(parent: str, step: Step, state: BuildState, nonce: str | None = None) -> str:
    """The key of the layer ``step`` makes on ``parent`` in ``state``; a nonce (forced
    steps) makes a key no other build shares."""
    return digest("step", parent, canonical(step), state.key_part(), nonce)


def describe(step: Step) -> str:
    """How the build log names a step (Dockerfile spelling)."""
    if isinstance(step, RunStep):
        return f"RUN {step.command}"
    if isinstance(step, CopyStep):
        flags = "".join([f"--chown={step.user} " if step.user else "",
                         f"--chmod={step.mode:o} " if step.mode is not None else ""])
        return f"COPY {flags}{step.src} {step.dest}"
    if isinstance(step, EnvStep):
        return "ENV " + " ".join(f"{k}={v}" for k, v in step.values)
    if isinstance(step, WorkdirStep):
        return f"WORKDIR {step.path}"
    return f"USER {step.user}"
