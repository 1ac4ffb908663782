"""envd's runtime bundle: its code and dependencies, mounted read-only at /opt/bac.

The bundle is built with the host's pip for the *template's* Python (binary wheels only,
``--target``), plus copies of ``bac_envd`` and ``bac_protocol``, byte-compiled once so
no sandbox compiles at start-up. Other guest code that templates run (``bac_kernel``, the
code interpreter) goes in ``guest/``, without its dependencies: those are the template's,
and ``guest/`` is on the PYTHONPATH of the template's start command only. Its directory
name is a hash of everything in it, so a change to envd's code or pins gives a new bundle
and old sandboxes keep theirs; and a bundle of that name in a shared bundles dir (``cache``)
is linked instead of built (``_bundle_cache``).

Third-party dependencies are found by reading envd's imports and pinned to the versions
installed next to the server, so envd runs inside exactly what the tests ran against.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from bac_server.host import remove_tree

from ..layers import find_in_layers
from ._bundle_cache import publish, seed

Progress = Callable[[str], None]
GUEST_PACKAGES = ("bac_envd", "bac_protocol")
# Code for templates' own services, mounted at /opt/bac/guest (dependencies not bundled).
TEMPLATE_GUEST_PACKAGES = ("bac_kernel",)
_EXTRA_PINS = ("h11",)  # uvicorn's HTTP/1.1 parser, chosen explicitly by envd
# envd's spawn helper (bac_envd/process/spawn_helper.c), compiled static into the bundle;
# without a C compiler on the host envd starts commands by its slower fork path.
_HELPER_SOURCE = "bac_envd/process/spawn_helper.c"
_HELPER_BINARY = "bac_envd/process/bac-spawn"
_BUILT = frozenset({"bac-spawn"})


class EnvdBundleError(Exception):
    """The envd bundle could not be built."""


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EnvdBundleError(f"package {name} is not importable on the host")
    return Path(next(iter(spec.submodule_search_locations)))


def _sources(packages: tuple[str, ...] = GUEST_PACKAGES) -> list[tuple[str, Path]]:
    files: list[tuple[str, Path]] = []
    for name in packages:
        root = _package_dir(name)
        for path in sorted(root.rglob("*")):
            if path.name in _BUILT:  # built into the bundle from its source (a dev build)
                continue
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.append((f"{name}/{path.relative_to(root)}", path))
    return files


def envd_requirements() -> list[str]:
    """``dist==version`` for every third-party module envd or its protocol code imports."""
    return list(_requirements())


# Once per process: mapping modules to distributions reads every installed package's
# metadata (~2 s on a busy host). A server picks up a dependency newly added to envd's
# code when it restarts, as it picks up any other code change.
@functools.cache
def _requirements() -> tuple[str, ...]:
    modules: set[str] = set()
    for _, path in _sources():
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    third_party = {m for m in modules
                   if m not in sys.stdlib_module_names and m not in GUEST_PACKAGES}
    owners = importlib.metadata.packages_distributions()
    dists: set[str] = set(_EXTRA_PINS)
    for module in third_party:
        if module not in owners:
            raise EnvdBundleError(f"envd imports {module}, which is not installed on the host")
        dists.update(owners[module])
    return tuple(sorted(f"{d}=={importlib.metadata.version(d)}" for d in dists))


def template_python(layers: Sequence[Path]) -> str:
    """``3.11`` for a template whose /usr/bin/python3 is python3.11 (``layers``: topmost
    first, as the sandbox's overlay stacks them)."""
    found = find_in_layers(layers, "usr/bin/python3")
    target = os.readlink(found) if found is not None and found.is_symlink() else "python3"
    version = target.rsplit("python", 1)[-1]
    if not version.startswith("3.") or not version[2:].isdigit():
        raise EnvdBundleError(f"cannot tell the Python version of {layers[0]} ({target!r})")
    return version


def bundle_digest(python_version: str) -> str:
    digest = hashlib.sha256()
    digest.update(f"{python_version}|{platform.machine()}|".encode())
    digest.update("\n".join(envd_requirements()).encode())
    for relative, path in _sources() + _sources(TEMPLATE_GUEST_PACKAGES):
        digest.update(relative.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


async def _run(argv: list[str], what: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        start_new_session=True)
    try:
        out, _ = await proc.communicate()
    except BaseException:
        # A server stopping mid-build: pip, or compileall and its workers, must not outlive
        # it and keep writing into a build dir being removed (or a data dir already gone).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 10)
        raise
    if proc.returncode != 0:
        raise EnvdBundleError(f"{what} failed:\n{out.decode(errors='replace')[-3000:]}")


def _pip_argv(lib: Path, python_version: str) -> list[str]:
    machine = platform.machine()
    argv = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--no-input", "--no-compile", "--target", str(lib), "--python-version",
            python_version, "--implementation", "cp", "--only-binary=:all:"]
    for tag in ("manylinux2014", "manylinux_2_17", "manylinux_2_28", "musllinux_1_1"):
        if tag != "musllinux_1_1":
            argv += ["--platform", f"{tag}_{machine}"]
    return argv + envd_requirements()


def _copy_guest_code(lib: Path) -> None:
    for name in GUEST_PACKAGES:
        shutil.copytree(_package_dir(name), lib / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", *_BUILT))
    for name in TEMPLATE_GUEST_PACKAGES:
        shutil.copytree(_package_dir(name), lib.parent / "guest" / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


async def _compile(lib: Path, python_version: str, report: Progress) -> None:
    """Byte-compile with the template's interpreter version (unchecked hashes: no stat)."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" != python_version:
        # SECURITY: the template's own interpreter is code of whoever built the template;
        # it never runs on the host. envd then compiles in memory at each start (slower).
        report(f"envd bundle for Python {python_version} is not byte-compiled (the host "
               f"runs {sys.version_info[0]}.{sys.version_info[1]})")
        return
    await _run([sys.executable, "-m", "compileall", "-q", "-j", "0",
                "--invalidation-mode", "unchecked-hash", str(lib), str(lib.parent / "guest")],
               "compileall")


async def _build_helper(lib: Path, report: Progress) -> None:
    """envd's spawn helper, static (it runs as root with a command's environment: no
    dynamic loader to steer), for the host's machine, which is the sandboxes'."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        report("no C compiler on the host: envd's commands start by its fork path (slower)")
        return
    await _run([compiler, "-static", "-O2", "-Wall", "-o", str(lib / _HELPER_BINARY),
                str(lib / _HELPER_SOURCE)], "cc (envd's spawn helper)")


def _fresh_dir(work: Path) -> None:
    work.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    remove_tree(work)
    work.mkdir(mode=0o755)


async def ensure_envd_bundle(bundles_dir: Path, rootfs: Path,
                             progress: Progress | None = None, *,
                             lowers: Sequence[Path] = (), cache: Path | None = None) -> Path:
    """Return ``bundles_dir/<digest>`` (mounted at /opt/bac), building it if needed.
    ``lowers``: the template's built layers above ``rootfs``, topmost first. ``cache``:
    another data dir's bundles dir, linked from when it has the bundle, shared to after a
    build."""
    report = progress or (lambda _line: None)
    layers = (*lowers, rootfs)
    python_version = template_python(layers)
    digest = bundle_digest(python_version)
    final = bundles_dir / digest
    if (final / "lib").is_dir():
        return final
    if cache == bundles_dir:
        cache = None
    work = bundles_dir / f".build-{digest}-{os.getpid()}"
    await asyncio.to_thread(_fresh_dir, work)
    try:
        seeded = cache is not None and await asyncio.to_thread(seed, cache / digest, work)
        if seeded:
            report(f"envd bundle {digest} linked from {cache}")
        else:
            report(f"building the envd bundle for Python {python_version}: "
                   + ", ".join(envd_requirements()))
            await _run(_pip_argv(work / "lib", python_version), "pip install (envd bundle)")
            _copy_guest_code(work / "lib")
            await _build_helper(work / "lib", report)
            await _compile(work / "lib", python_version, report)
        os.chmod(work, 0o755)  # noqa: S103 - public code, read by sandbox root
        try:
            os.rename(work, final)
        except OSError:
            if not (final / "lib").is_dir():  # a concurrent builder won; else a real error
                raise
            await asyncio.to_thread(remove_tree, work)
    except BaseException:
        await asyncio.to_thread(remove_tree, work)
        raise
    if cache is not None and not seeded:
        await asyncio.to_thread(publish, final, cache)
    report(f"envd bundle ready: {final}")
    return final
