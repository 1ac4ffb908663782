"""``Template``: a recipe for a sandbox template, written in Python or read from a Dockerfile.

::

    template = (
        Template("base")                          # or Template.from_image("debian:bookworm")
        .run("apt-get update && apt-get install -y jq", user="root")
        .copy("app/", "/home/user/app/")
        .env({"MODE": "prod"})
        .workdir("/home/user/app")
        .start_cmd("python3 -m http.server 8000", ready_cmd="curl -sf localhost:8000")
    )

A recipe is plain data: nothing is read from disk (beyond a Dockerfile) or sent anywhere
until :meth:`bac.AsyncTemplates.build` hashes the copied files and sends the steps. The
steps are the E2B template API's (``RUN``, ``COPY``, ``ENV``, ``WORKDIR``, ``USER``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from bac._errors import InvalidArgumentError
from bac._template._dockerfile import parse_dockerfile
from bac._template._errors import DockerfileWarning
from bac._template._steps import (
    DEFAULT_BASE,
    BaseRef,
    FromKind,
    StepType,
    TemplateStep,
    check_source,
)
from bac._template._user_steps import UserSteps

StrPath = str | os.PathLike[str]


class Template:
    """A template recipe: a base, build steps, and how its sandboxes start."""

    def __init__(self, from_template: str | None = None, *, from_image: str | None = None,
                 context: StrPath | None = None, ignore: Sequence[str] = ()) -> None:
        """Start from the template ``from_template`` (default ``base``) or the image
        ``from_image``; COPY sources are relative to ``context`` (default: the current
        directory), minus its ``.dockerignore`` and the ``ignore`` patterns."""
        if from_template is not None and from_image is not None:
            raise InvalidArgumentError("give from_template or from_image, not both")
        if from_image is not None:
            self._base = BaseRef(_nonempty(from_image, "from_image"), "image")
        else:
            self._base = BaseRef(_nonempty(from_template or DEFAULT_BASE, "from_template"),
                                 "template")
        self._context = Path(context if context is not None else os.getcwd()).resolve()
        self._ignore = tuple(ignore)
        self._steps: list[TemplateStep] = []
        self._start_cmd: str | None = None
        self._ready_cmd: str | None = None
        self._force = False
        self._force_next = False
        self._dockerignore: Path | None = None
        self.warnings: list[DockerfileWarning] = []

    @classmethod
    def from_image(cls, image: str, *, username: str | None = None,
                   password: str | None = None, context: StrPath | None = None,
                   ignore: Sequence[str] = ()) -> Template:
        """Start from an image: ``debian:<suite>``, ``oci:<dir>``, ``oci-archive:<file>``,
        ``docker-archive:<file>`` or a registry reference (the server decides which it
        can fetch); ``username``/``password`` log in to the registry."""
        if (username is None) != (password is None):
            raise InvalidArgumentError("registry credentials need both username and password")
        template = cls(from_image=image, context=context, ignore=ignore)
        template._base = BaseRef(template._base.ref, "image", username, password)
        return template

    @classmethod
    def from_dockerfile(cls, path: StrPath, *, context: StrPath | None = None,
                        build_args: Mapping[str, str] | None = None,
                        from_kind: FromKind | None = None,
                        ignore: Sequence[str] = ()) -> Template:
        """Read a Dockerfile (see docs/templates.md for the subset); ``context`` defaults
        to its directory. ``from_kind`` overrides how its ``FROM`` is read."""
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidArgumentError(f"cannot read {path}: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise InvalidArgumentError(f"{path} is not UTF-8 text") from exc
        template = cls(context=context if context is not None else file.parent, ignore=ignore)
        recipe = parse_dockerfile(text, file=str(path), context=template.context,
                                  build_args=build_args, from_kind=from_kind)
        template._base = recipe.base
        template._steps = list(recipe.steps)
        if recipe.start_command is not None:
            template.start_cmd(recipe.start_command)
        if recipe.ready_command is not None:
            template.ready_cmd(recipe.ready_command)
        template.warnings = list(recipe.warnings)
        dockerignore = Path(f"{file}.dockerignore")
        if dockerignore.is_file():
            template._dockerignore = dockerignore
        return template

    # -- steps -----------------------------------------------------------------------------

    def run(self, command: str | Sequence[str], user: str | None = None) -> Self:
        """Run a shell command (several are joined with ``&&``) as ``user`` or the
        current user (``root`` until :meth:`user` changes it)."""
        text = command if isinstance(command, str) else " && ".join(command)
        args = (_nonempty(text, "command"),) + ((user,) if user else ())
        return self._add("RUN", args)

    def copy(self, src: StrPath | Sequence[StrPath], dest: StrPath, *,
             user: str | None = None, mode: int | None = None) -> Self:
        """Copy files or directories (globs allowed) from the context to ``dest``, owned
        by ``user`` (default root) with permission bits ``mode`` if given."""
        sources = [src] if isinstance(src, str | os.PathLike) else list(src)
        if not sources:
            raise InvalidArgumentError("copy needs at least one source")
        if mode is not None and not 0 <= mode <= 0o7777:
            raise InvalidArgumentError(f"mode must be within 0o0..0o7777, got {mode:#o}")
        for source in sources:
            if os.path.isabs(source):
                raise InvalidArgumentError(
                    f"copy source {source!s} must be relative to the context {self._context}")
        # One call, one step as written, however many steps (one per source) are sent.
        written = (f"COPY {' '.join(str(s) for s in sources)} {dest}" if len(sources) > 1
                   else None)
        call = self._next_user_step()
        for source in sources:
            self._add("COPY", (check_source(str(source)), _nonempty(str(dest), "dest"),
                               user or "", f"{mode:04o}" if mode is not None else ""),
                      instruction=written, user_step=call)
        return self

    def env(self, values: Mapping[str, str] | None = None, /, **more: str) -> Self:
        """Set environment variables for later steps and for the template's sandboxes."""
        merged = {**(values or {}), **more}
        for name in merged:
            if not name or "=" in name:
                raise InvalidArgumentError(f"invalid environment variable name {name!r}")
        if merged:
            self._add("ENV", tuple(item for pair in merged.items() for item in pair))
        return self

    def workdir(self, path: str) -> Self:
        """Change directory for later steps (made if missing) and for the sandboxes."""
        return self._add("WORKDIR", (_nonempty(path, "workdir"),))

    def user(self, name: str) -> Self:
        """Run later steps as ``name``; also the sandboxes' default user."""
        return self._add("USER", (_nonempty(name, "user"),))

    def start_cmd(self, command: str, ready_cmd: str | None = None) -> Self:
        """A command started in every sandbox of the template (and kept running), and
        optionally the command that exits 0 once it is ready."""
        self._start_cmd = _nonempty(command, "start command")
        if ready_cmd is not None:
            self.ready_cmd(ready_cmd)
        return self

    def ready_cmd(self, command: str) -> Self:
        """A command that exits 0 once the template's sandboxes are ready."""
        self._ready_cmd = _nonempty(command, "ready command")
        return self

    def skip_cache(self) -> Self:
        """Rebuild every later step (all of them if called before the first)."""
        if not self._steps:
            self._force = True
        self._force_next = True
        return self

    # -- what was recorded ---------------------------------------------------------------

    @property
    def base(self) -> BaseRef:
        return self._base

    @property
    def steps(self) -> tuple[TemplateStep, ...]:
        return tuple(self._steps)

    @property
    def start_command(self) -> str | None:
        return self._start_cmd

    @property
    def ready_command(self) -> str | None:
        return self._ready_cmd

    @property
    def context(self) -> Path:
        return self._context

    @property
    def ignore_patterns(self) -> tuple[str, ...]:
        return self._ignore

    @property
    def dockerignore_file(self) -> Path | None:
        """A Dockerfile-specific ignore file (``Dockerfile.dockerignore``), if one exists."""
        return self._dockerignore

    @property
    def force(self) -> bool:
        return self._force

    @property
    def user_steps(self) -> UserSteps:
        """The steps as written (a COPY of several sources is one; the Dockerfile's
        bookkeeping is none), as builds show them."""
        return UserSteps(self._steps)

    def _next_user_step(self) -> int:
        return 1 + max((s.user_step or 0 for s in self._steps), default=0)

    def _add(self, kind: StepType, args: tuple[str, ...], *, instruction: str | None = None,
             user_step: int | None = None) -> Self:
        """One step sent; a call of its own unless ``user_step`` says whose part it is."""
        self._steps.append(TemplateStep(
            kind, args, self._force_next, None, instruction,
            user_step if user_step is not None else self._next_user_step()))
        return self

    def to_wire(self, files_hashes: Mapping[int, str], base: BaseRef | None = None,
                force: bool = False) -> dict[str, Any]:
        """The body of ``POST /v2/templates/{id}/builds/{build}``; ``files_hashes`` maps
        the index of each COPY step to its hash; ``base`` is the resolved base."""
        base = base or self._base
        steps: list[dict[str, Any]] = []
        for index, step in enumerate(self._steps):
            item: dict[str, Any] = {"type": step.type, "args": list(step.args),
                                    "force": step.force}
            if step.type == "COPY":
                item["filesHash"] = files_hashes[index]
            steps.append(item)
        body: dict[str, Any] = {"steps": steps, "force": force or self._force}
        if base.kind == "template":
            body["fromTemplate"] = base.ref
        else:
            body["fromImage"] = base.ref
            if base.username is not None:
                body["fromImageRegistry"] = {"type": "registry", "username": base.username,
                                             "password": base.password}
        if self._start_cmd is not None:
            body["startCmd"] = self._start_cmd
        if self._ready_cmd is not None:
            body["readyCmd"] = self._ready_cmd
        return body


def _nonempty(value: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"{what} must be a non-empty string")
    return value
