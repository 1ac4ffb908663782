"""The `code-interpreter` template: base plus Jupyter kernels and the data-science stack.

A plain data description for the derived-template builder (``_derived``) to consume:
what goes on top of `base` (Debian packages, PyPI packages into the template's system
Python, npm packages installed globally), which Bac guest packages must be importable in
the sandbox, and how the kernel server is started and known to be ready.

The kernel server (`python3 -m bac_kernel`) listens on 49999, the port the official
`e2b-code-interpreter` SDK talks to, and writes `ready` to `--ready-fd` once it listens.
It starts a Python kernel at once and the other languages on first use; it runs as root
in the sandbox user's home, as E2B's interpreter does (its Jupyter server runs under sudo),
so a context may work in any directory (docs/code-interpreter.md, *Security*), and it is
restarted if it exits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

KERNEL_PORT = 49999


@dataclass(frozen=True)
class StartCommand:
    """How the sandbox starts one long-running service, and when it counts as ready."""

    argv: tuple[str, ...]
    user: str
    cwd: str
    env: tuple[tuple[str, str], ...]
    #: `{ready_fd}` in argv is replaced by the write end of a pipe; the service writes
    #: this line to it once it accepts connections.
    ready_line: bytes
    #: Fallback ready check for starters without a pipe: GET this URL until 200.
    ready_url: str
    restart_on_exit: bool


@dataclass(frozen=True)
class LayerRecipe:
    """A template built as one layer on top of another template."""

    name: str
    aliases: tuple[str, ...]
    parent: str
    debian_packages: tuple[str, ...]
    pypi_packages: tuple[str, ...]
    #: Installed into the template's /usr/local with the host's npm.
    npm_global_packages: tuple[str, ...]
    #: Bac's own packages that must be importable by the template's python3 (in envd's
    #: bundle under /opt/bac/guest, on the start command's PYTHONPATH).
    guest_packages: tuple[str, ...]
    #: The service it starts (envd's supervisor), or None for a plain sandbox.
    start: StartCommand | None
    #: Commands run as root after the packages are installed and ``files`` written (each
    #: one argv).
    post_install: tuple[tuple[str, ...], ...] = field(default=())
    #: Files written into the template after its packages: (absolute path, text, mode).
    files: tuple[tuple[str, str, int], ...] = field(default=())
    #: Run (as the template's user) in a started sandbox until it succeeds, before its
    #: start snapshot is taken: what the service should have done once in every sandbox
    #: restored from it. Not part of the build (the digest leaves it out).
    warm_up: str | None = None
    #: Memory (MiB) of its sandboxes when a create asks for none; None: the server's
    #: default. Not part of the build either.
    memory_mb: int | None = None


_WARM_UP = (
    "python3 -c 'import urllib.request; urllib.request.urlopen("
    f'"http://127.0.0.1:{KERNEL_PORT}/health?kernel=python", timeout=60).read()\''
)

CODE_INTERPRETER = LayerRecipe(
    name="code-interpreter",
    # The name the official e2b-code-interpreter SDK asks for.
    aliases=("code-interpreter-v1",),
    parent="base",
    debian_packages=(
        # JavaScript/TypeScript kernel runtime (tslab ships prebuilt zeromq binaries). npm
        # itself is not installed: Debian's pulls in hundreds of packages, so the builder
        # installs the npm packages with the host's npm.
        "nodejs",
        # R kernel.
        "r-base-core",
        "r-cran-irkernel",
        # Java kernel: Bac's kernel around the JDK's jshell (IJava is not packaged).
        "default-jdk-headless",
        # matplotlib's default font, so charts render the same as on the host.
        "fonts-dejavu-core",
    ),
    pypi_packages=(
        # The kernel server and its kernels (same lower bounds as Bac's `kernel` extra).
        "starlette>=0.40",
        "uvicorn>=0.30",
        "h11>=0.16",
        "jupyter_client>=8.6",
        "ipykernel>=7",
        "bash_kernel>=0.10",
        "orjson>=3.10",  # fast JSON for megabyte results, in the server and the kernels
        # What agents expect to import.
        "numpy>=2",
        "pandas>=2.2",
        "matplotlib>=3.9",
        "seaborn>=0.13",
        "scipy>=1.13",
        "scikit-learn>=1.5",
        "requests>=2.32",
    ),
    npm_global_packages=("tslab@1.0.22",),
    guest_packages=("bac_kernel",),
    start=StartCommand(
        argv=(
            "python3", "-m", "bac_kernel", "--port", str(KERNEL_PORT), "--ready-fd", "{ready_fd}",
        ),
        # E2B's template runs its kernels as root; the sandbox's root is an unprivileged
        # host uid, and `user` can become root with sudo anyway.
        user="root",
        cwd="/home/user",
        env=(("PYTHONPATH", "/opt/bac/guest"),),
        ready_line=b"ready\n",
        ready_url=f"http://127.0.0.1:{KERNEL_PORT}/health",
        restart_on_exit=True,
    ),
    # The default Python context has started its kernel (nothing run in it): the first
    # run_code of a sandbox restored from the snapshot does not wait for one.
    warm_up=_WARM_UP,
)
