"""envd's runtime bundle: its code and dependencies, mounted read-only at /opt/bac.

The bundle is built with the host's pip for the *template's* Python (binary wheels only,
``--target``), plus copies of ``bac_envd`` and ``bac_protocol``, byte-compiled once so
no sandbox compiles at start-up. Other guest code that templates run (``bac_kernel``, the
code interpreter) goes in ``guest/``, without its dependencies: those are the template's,
and ``guest/`` is on the PYTHONPATH of the template's start command only. Its directory
name is a hash of everything in it, so a change to envd's code or pins gives a new bundle
and old sandboxes keep theirs.

Third-party dependencies are found by reading envd's imports and pinned to the versions
installed next to the server, so envd runs inside exactly what the tests ran against.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from bac_server.host import remove_tree

Progress = Callable[[str], None]
GUEST_PACKAGES = ("bac_envd", "bac_protocol")
# Code for templates' own services, mounted at /opt/bac/guest (dependencies not bundled).
TEMPLATE_GUEST_PACKAGES = ("bac_kernel",)
_EXTRA_PINS = ("h11",)  # uvicorn's HTTP/1.1 parser, chosen explicitly by envd


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
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.append((f"{name}/{path.relative_to(root)}", path))
    return files


def envd_requirements() -> list[str]:
    """``dist==version`` for every third-party module envd or its protocol code imports."""
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
    return sorted(f"{d}=={importlib.metadata.version(d)}" for d in dists)


def template_python(rootfs: Path) -> str:
    """``3.11`` for a rootfs whose /usr/bin/python3 is python3.11."""
    target = os.readlink(rootfs / "usr/bin/python3") if (rootfs / "usr/bin/python3").is_symlink() \
        else "python3"
    version = target.rsplit("python", 1)[-1]
    if not version.startswith("3.") or not version[2:].isdigit():
        raise EnvdBundleError(f"cannot tell the Python version of {rootfs} ({target!r})")
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
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
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
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in TEMPLATE_GUEST_PACKAGES:
        shutil.copytree(_package_dir(name), lib.parent / "guest" / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


async def _compile(lib: Path, rootfs: Path, python_version: str) -> None:
    """Byte-compile with the template's interpreter version (unchecked hashes: no stat)."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == python_version:
        await _run([sys.executable, "-m", "compileall", "-q", "-j", "0",
                    "--invalidation-mode", "unchecked-hash", str(lib), str(lib.parent / "guest")],
                   "compileall")
        return
    # A different host Python writes unusable .pyc files: use the template's own
    # interpreter, in a private mount namespace, against the bundle bound at /opt/bac.
    script = ('mount --bind "$1" "$2/opt/bac" && exec chroot "$2" /usr/bin/python3 -m '
              'compileall -q -j 0 --invalidation-mode unchecked-hash /opt/bac/lib /opt/bac/guest')
    await _run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                str(lib.parent), str(rootfs)], "compileall (template python)")


def _fresh_dir(work: Path) -> None:
    work.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    remove_tree(work)
    work.mkdir(mode=0o755)


async def ensure_envd_bundle(bundles_dir: Path, rootfs: Path,
                             progress: Progress | None = None) -> Path:
    """Return ``bundles_dir/<digest>`` (mounted at /opt/bac), building it if needed."""
    report = progress or (lambda _line: None)
    python_version = template_python(rootfs)
    digest = bundle_digest(python_version)
    final = bundles_dir / digest
    if (final / "lib").is_dir():
        return final
    work = bundles_dir / f".build-{digest}-{os.getpid()}"
    await asyncio.to_thread(_fresh_dir, work)
    try:
        report(f"building the envd bundle for Python {python_version}: "
               + ", ".join(envd_requirements()))
        await _run(_pip_argv(work / "lib", python_version), "pip install (envd bundle)")
        _copy_guest_code(work / "lib")
        await _compile(work / "lib", rootfs, python_version)
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
    report(f"envd bundle ready: {final}")
    return final
