"""The languages a context can speak: which kernel runs each, and how to set its env vars.

Every language maps to one Jupyter kernel started by its own command line (no kernelspec
files on disk are needed): ipykernel for Python, bash_kernel for Bash, tslab for
JavaScript and TypeScript (both with top-level await), IRkernel for R. JavaScript,
TypeScript and R start through small launchers beside this module (`launchers/`) that make
a cell's last value an `execute_result` and, for JS/TS, a thrown error an `error`
message, as other kernels do. Java is Bac's own kernel around the JDK's JShell
(`bac_kernel.jshell`). A language whose runtime is missing is known but
unavailable, and says what is missing.

Env var changes run as silent cells in the kernel's own language, because a kernel that
is already running cannot have its process environment changed from outside.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bac_kernel._errors import BadRequestError, UnknownLanguageError

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

#: Loaded into every Python kernel at start: formatters for DataFrames and charts.
INKERNEL_EXTENSION = "bac_kernel.inkernel"

EnvCode = Callable[[Mapping[str, str], Sequence[str]], str]


def _python_env(assign: Mapping[str, str], unset: Sequence[str]) -> str:
    # `__import__` keeps the user's namespace free of helper names.
    return (
        f"__import__('os').environ.update({json.dumps(dict(assign))})\n"
        f"for _k in {json.dumps(list(unset))}: __import__('os').environ.pop(_k, None)\n"
        "_k = None\ndel _k"
    )


def _bash_env(assign: Mapping[str, str], unset: Sequence[str]) -> str:
    lines = [f"export {k}={shlex.quote(v)}" for k, v in assign.items()]
    lines += [f"unset {k}" for k in unset]
    return "\n".join(lines) or ":"


def _node_env(assign: Mapping[str, str], unset: Sequence[str]) -> str:
    # An arrow function keeps tslab from declaring (and then printing) anything.
    return (
        f"(() => {{ Object.assign(process.env, {json.dumps(dict(assign))}); "
        f"for (const k of {json.dumps(list(unset))}) delete process.env[k]; }})()"
    )


def _r_env(assign: Mapping[str, str], unset: Sequence[str]) -> str:
    lines = [f"invisible(Sys.setenv({k} = {json.dumps(v)}))" for k, v in assign.items()]
    if unset:
        lines.append(f"invisible(Sys.unsetenv(c({', '.join(json.dumps(k) for k in unset)})))")
    return "\n".join(lines) or "invisible(NULL)"


def _java_env(assign: Mapping[str, str], unset: Sequence[str]) -> str:
    # Java's environment is read-only: the map behind System.getenv() is edited by
    # reflection (JShellHost opens java.util to the agent JVM). One block: no declarations
    # are left in the user's namespace.
    puts = "".join(f"m.put({json.dumps(k)}, {json.dumps(v)}); " for k, v in assign.items())
    removes = "".join(f"m.remove({json.dumps(k)}); " for k in unset)
    return (
        "{ try { var env = System.getenv(); var f = env.getClass().getDeclaredField(\"m\"); "
        "f.setAccessible(true); @SuppressWarnings(\"unchecked\") var m = "
        f"(java.util.Map<String, String>) f.get(env); {puts}{removes}}} "
        "catch (ReflectiveOperationException e) { throw new RuntimeException(e); } }"
    )


@dataclass(frozen=True)
class Language:
    """One language a context can be created with."""

    name: str
    argv: tuple[str, ...]
    env_code: EnvCode
    #: Executables that must be on PATH, and Python modules that must be importable.
    needs_programs: tuple[str, ...] = ()
    needs_modules: tuple[str, ...] = ()
    #: Run silently once the kernel is up (`_handshake`): what its first cell would load.
    warm_code: str = ""

    def missing(self) -> str | None:
        """What is missing for this language to run here, or None when it can."""
        for program in self.needs_programs:
            if shutil.which(program) is None:
                return f"program {program!r} is not installed"
        for module in self.needs_modules:
            if importlib.util.find_spec(module) is None:
                return f"Python module {module!r} is not installed"
        return None


_PY = sys.executable
_LAUNCHERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launchers")


def _tslab_dist() -> str:
    """tslab's `dist` directory (its modules, which the JS/TS launcher builds on)."""
    tslab = shutil.which("tslab")
    if tslab is None:
        return "/nonexistent/tslab/dist"  # the language reports tslab missing first
    return os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(tslab))), "dist")


_JSLAB = ("node", os.path.join(_LAUNCHERS, "jslab.js"), _tslab_dist(), "{connection_file}")

LANGUAGES: dict[str, Language] = {
    lang.name: lang
    for lang in (
        Language(
            "python",
            (
                _PY,
                "-m",
                "ipykernel_launcher",
                "-f",
                "{connection_file}",
                f"--IPKernelApp.extensions={INKERNEL_EXTENSION}",
                "--HistoryManager.enabled=False",
                "--Application.log_level=ERROR",
            ),
            _python_env,
            needs_modules=("ipykernel",),
            # Compiles and runs a cell and formats a value with every formatter (the
            # inkernel extension's too), as a first `1+1` would, without displaying it.
            warm_code="get_ipython().display_formatter.format(1 + 1)",
        ),
        Language(
            "bash",
            (_PY, "-m", "bash_kernel", "-f", "{connection_file}", "--Application.log_level=ERROR"),
            _bash_env,
            needs_programs=("bash",),
            needs_modules=("bash_kernel",),
        ),
        Language(
            "javascript",
            (*_JSLAB, "--js"),
            _node_env,
            needs_programs=("tslab", "node"),
        ),
        Language(
            "typescript",
            _JSLAB,
            _node_env,
            needs_programs=("tslab", "node"),
        ),
        Language(
            "r",
            ("R", "--slave", "-f", os.path.join(_LAUNCHERS, "irkernel.R"),
             "--args", "{connection_file}"),
            _r_env,
            needs_programs=("R",),
        ),
        Language(
            "java",
            (_PY, "-m", "bac_kernel.jshell", "-f", "{connection_file}"),
            _java_env,
            # jshell marks a JDK (its jdk.jshell module), not only a JRE.
            needs_programs=("java", "jshell"),
            needs_modules=("ipykernel",),
        ),
    )
}

_ALIASES = {"js": "javascript", "ts": "typescript", "sh": "bash", "python3": "python"}

DEFAULT_LANGUAGE = "python"


def resolve_language(name: str | None) -> Language:
    """The language called `name` (case-insensitive, aliases allowed); python when None."""
    key = (name or DEFAULT_LANGUAGE).strip().lower()
    key = _ALIASES.get(key, key)
    language = LANGUAGES.get(key)
    if language is None:
        known = ", ".join(sorted([*LANGUAGES, *_ALIASES]))
        raise UnknownLanguageError(f"Unknown language {name!r}; supported: {known}")
    missing = language.missing()
    if missing is not None:
        raise UnknownLanguageError(
            f"Language {language.name!r} is not available in this sandbox: {missing}"
        )
    return language


def check_env_names(names: Sequence[str]) -> None:
    """Reject env var names that are not portable identifiers (they end up in code)."""
    for name in names:
        if not _ENV_NAME.match(name):
            raise BadRequestError(f"Invalid environment variable name {name!r}")
