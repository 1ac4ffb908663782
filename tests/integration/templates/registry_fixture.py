"""A real registry on loopback (Debian's ``docker-registry``) and small OCI test images.

No public registry is reachable here, and none is needed: images are made from layer tars
written with :mod:`tarfile` and assembled with ``umoci``, then pushed with ``skopeo``::

    with running_registry(tmp / "reg") as registry:            # 127.0.0.1:<free port>
        layout = build_image(tmp / "layout", "v1", [layer1, layer2], config)
        digest = registry.push(f"oci:{layout}:v1", "team/app:1")
        registry.blob_fetches(layer_digest)                      # GETs seen in its log

``write_tree_layer`` packs a whole (shifted) rootfs as a layer, ids back to container ids.

``running_registry(..., auth=("alice", "pw"))`` requires basic auth (htpasswd, bcrypt).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import socket
import subprocess
import tarfile
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REGISTRY = "/usr/bin/docker-registry"
READY_TIMEOUT_S = 20.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _bcrypt(password: str) -> str:
    # The registry's htpasswd accepts bcrypt only; libxcrypt (behind Python's crypt module
    # on Debian) makes it without another dependency. crypt is gone in Python 3.13.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt
    # The lowest cost (2**4 rounds): the registry checks it on every request.
    return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16))


@dataclass
class Registry:
    host: str
    proc: subprocess.Popen[bytes]
    auth: tuple[str, str] | None
    log: list[str] = field(default_factory=list)

    def push(self, source: str, repo_tag: str) -> str:
        """Push ``source`` (a skopeo name) as ``repo_tag``; returns the manifest digest."""
        creds = ["--dest-creds", ":".join(self.auth)] if self.auth else []
        subprocess.run(["skopeo", "copy", "-q", "--dest-tls-verify=false", *creds, source,
                        f"docker://{self.host}/{repo_tag}"], check=True, capture_output=True)
        inspect_creds = ["--creds", ":".join(self.auth)] if self.auth else []
        raw = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false",
                              *inspect_creds, f"docker://{self.host}/{repo_tag}"],
                             check=True, capture_output=True).stdout
        return "sha256:" + hashlib.sha256(raw).hexdigest()

    def blob_fetches(self, digest: str) -> int:
        """How many times the blob was downloaded (GET, not HEAD), from the access log."""
        return sum(1 for line in list(self.log) if f"/blobs/{digest} " in line
                   and '"GET ' in line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _start(storage: Path, auth: tuple[str, str] | None) -> Registry:
    port = _free_port()
    storage.mkdir(parents=True, exist_ok=True)
    lines = ["version: 0.1", "log:", "  level: info", "storage:", "  filesystem:",
             f"    rootdirectory: {storage / 'data'}", "  delete:", "    enabled: true",
             "http:", f"  addr: 127.0.0.1:{port}"]
    if auth is not None:
        (storage / "htpasswd").write_text(f"{auth[0]}:{_bcrypt(auth[1])}\n")
        lines += ["auth:", "  htpasswd:", "    realm: bac-test",
                  f"    path: {storage / 'htpasswd'}"]
    config = storage / "config.yml"
    config.write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen([REGISTRY, "serve", str(config)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    registry = Registry(f"127.0.0.1:{port}", proc, auth)
    ready = threading.Event()

    def drain(stream: io.BufferedReader) -> None:
        with stream:  # closed here, at the end of its output
            for raw in stream:
                line = raw.decode(errors="replace")
                registry.log.append(line)
                if "listening on" in line:
                    ready.set()
        ready.set()  # the registry exited: stop waiting, the caller checks why

    for stream in (proc.stdout, proc.stderr):
        assert stream is not None
        threading.Thread(target=drain, args=(stream,), daemon=True).start()
    if not ready.wait(READY_TIMEOUT_S) or proc.poll() is not None:
        registry.stop()
        raise RuntimeError("docker-registry did not start:\n" + "".join(registry.log[-20:]))
    return registry


@contextlib.contextmanager
def running_registry(storage: Path, *, auth: tuple[str, str] | None = None
                     ) -> Iterator[Registry]:
    """A registry on a free loopback port, stopped (and reaped) on exit."""
    registry = None
    for _attempt in range(3):  # another test may take the free port before it binds
        try:
            registry = _start(storage, auth)
            break
        except RuntimeError:
            if _attempt == 2:
                raise
    assert registry is not None
    try:
        yield registry
    finally:
        registry.stop()


@dataclass(frozen=True)
class Entry:
    """One tar member of a test layer."""

    name: str
    kind: bytes = tarfile.REGTYPE
    data: bytes = b""
    mode: int = 0o644
    uid: int = 0
    gid: int = 0
    link: str = ""
    xattrs: tuple[tuple[str, str], ...] = ()
    device: tuple[int, int] = (0, 0)


def write_layer(path: Path, entries: list[Entry]) -> Path:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry.name)
            info.type, info.mode, info.uid, info.gid = entry.kind, entry.mode, entry.uid, entry.gid
            info.linkname = entry.link
            info.devmajor, info.devminor = entry.device
            info.pax_headers = {f"SCHILY.xattr.{k}": v for k, v in entry.xattrs}
            if entry.kind == tarfile.REGTYPE:
                info.size = len(entry.data)
                tar.addfile(info, io.BytesIO(entry.data))
            else:
                tar.addfile(info)
    return path


def write_tree_layer(path: Path, root: Path, id_base: int, id_size: int = 65536) -> Path:
    """A layer tar of the tree ``root`` (a rootfs shifted to host ids ``id_base``..), its
    owners shifted back to container ids as an image would carry them."""
    def to_container(info: tarfile.TarInfo) -> tarfile.TarInfo:
        for attr in ("uid", "gid"):
            host_id = getattr(info, attr)
            if not id_base <= host_id < id_base + id_size:
                raise ValueError(f"{info.name}: {attr} {host_id} is outside the shifted range")
            setattr(info, attr, host_id - id_base)
        info.uname = info.gname = ""  # only the numbers count; host names would mislead
        return info

    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for child in sorted(root.iterdir()):
            tar.add(child, arcname=child.name, filter=to_container)
    return path


def build_image(layout: Path, tag: str, layers: list[Path], *, config: tuple[str, ...] = (),
                architecture: str | None = None) -> Path:
    """An OCI layout holding ``layout:tag`` made of ``layers`` (in order) and ``config``
    (``umoci config`` options such as ``--config.env=A=b``)."""
    def umoci(*args: str) -> None:
        subprocess.run(["umoci", "--log", "error", *args], check=True, capture_output=True)

    if not (layout / "index.json").exists():
        umoci("init", "--layout", str(layout))
    umoci("new", "--image", f"{layout}:{tag}")
    for layer in layers:
        umoci("raw", "add-layer", "--image", f"{layout}:{tag}", str(layer))
    options = list(config)
    if architecture is not None:
        options.append(f"--architecture={architecture}")
    if options:
        umoci("config", "--image", f"{layout}:{tag}", *options)
    umoci("gc", "--layout", str(layout))
    return layout
