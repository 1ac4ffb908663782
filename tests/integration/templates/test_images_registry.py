"""FROM an image in a registry: a real docker-registry on loopback, skopeo and umoci."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from image_fixtures import (
    AUTH,
    SampleImage,
    arm_image,
    auth_registry,
    check_test_image,
    data_dir,
    images_dir,
    leftovers,
    registry,
    session_dir,
    test_image,
    tool_children,
)
from registry_fixture import Registry, running_registry

from bac_server.host import IdRange
from bac_server.templates import (
    FromImage,
    ImageError,
    ImageErrorKind,
    ImportedImage,
    RegistryAccess,
    materialize_image,
)
from bac_server.templates.images._refs import RegistryImage, parse_image_ref

pytestmark = pytest.mark.root

__all__ = ["arm_image", "auth_registry", "data_dir", "images_dir", "registry", "session_dir",
           "test_image"]


# The tests' registries listen on the loopback, which a build may reach only when the
# operator allows it (BAC_REGISTRY_ALLOW); these tests do.
LOOPBACK = RegistryAccess.parse("127.0.0.0/8")


async def pull(ref: str, data_dir: Path, lines: list[str] | None = None,
               username: str | None = None, password: str | None = None,
               registries: RegistryAccess = LOOPBACK) -> ImportedImage:
    sink = lines if lines is not None else []
    return await materialize_image(FromImage(ref, username, password), data_dir=data_dir,
                                   id_range=IdRange(), progress=sink.append,
                                   registries=registries)


@contextlib.contextmanager
def listener() -> Iterator[tuple[int, Callable[[], int]]]:
    """A port on the loopback that answers whoever connects with a line a registry
    never sends; yields it and a count of the connections it accepted."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _peer = server.accept()
            except OSError:
                return
            accepted.append(conn)
            with contextlib.suppress(OSError):
                conn.sendall(b"SECRET-BANNER of a host service\r\n")
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], lambda: len(accepted)
    finally:
        done.set()
        server.shutdown(socket.SHUT_RDWR)
        server.close()
        thread.join()


@pytest.fixture(scope="module")
def pushed(registry: Registry, test_image: SampleImage, arm_image: SampleImage) -> dict[str, str]:
    return {"app": registry.push(test_image.oci_ref, "team/app:1"),
            "arm": registry.push(arm_image.oci_ref, "team/arm:1")}


async def test_pull_from_registry(registry: Registry, pushed: dict[str, str],
                                  test_image: SampleImage, data_dir: Path) -> None:
    """A registry image arrives whole: layers in order with whiteouts, ids shifted into the
    sandbox range, setuid kept, capabilities and devices dropped, its config read."""
    image = await pull(f"{registry.host}/team/app:1", data_dir)
    assert image.digest == pushed["app"]
    check_test_image(image, test_image)
    assert leftovers(data_dir) == []


async def test_second_pull_is_cached(registry: Registry, pushed: dict[str, str],
                                     test_image: SampleImage, data_dir: Path) -> None:
    """A second materialize of an unchanged tag asks only for the manifest: no layer is
    downloaded again and the same published rootfs is returned."""
    first = await pull(f"{registry.host}/team/app:1", data_dir)
    fetched = [registry.blob_fetches(d) for d in test_image.layer_digests]
    again = await pull(f"{registry.host}/team/app:1", data_dir)
    assert again == first
    assert [registry.blob_fetches(d) for d in test_image.layer_digests] == fetched
    assert again.rootfs.stat().st_ino == first.rootfs.stat().st_ino


async def test_cached_image_survives_registry_outage(session_dir: Path, test_image: SampleImage,
                                                     data_dir: Path) -> None:
    """Once pulled anonymously, a tag (and its digest) still materializes from the cache
    while its registry is down; a tag never pulled fails as unreachable."""
    with running_registry(session_dir / "outage-registry") as reg:
        digest = reg.push(test_image.oci_ref, "team/app:1")
        first = await pull(f"{reg.host}/team/app:1", data_dir)
        host = reg.host
    lines: list[str] = []
    again = await pull(f"{host}/team/app:1", data_dir, lines)
    assert again == first and any("unreachable" in line for line in lines)
    assert await pull(f"{host}/team/app@{digest}", data_dir) == first
    with pytest.raises(ImageError) as caught:
        await pull(f"{host}/team/app:2", data_dir)
    assert caught.value.kind is ImageErrorKind.UNREACHABLE and host in str(caught.value)


async def test_mirror_serves_hub_names(registry: Registry, pushed: dict[str, str],
                                       data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With BAC_REGISTRY_MIRROR set, a name without a registry is pulled from the mirror."""
    monkeypatch.setenv("BAC_REGISTRY_MIRROR", registry.host)
    image = await pull("team/app:1", data_dir)
    assert image.digest == pushed["app"]


async def test_unreachable_mirror_is_named_with_its_setting(
        data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Docker Hub name whose mirror is out of reach fails 'unreachable', naming the
    mirror tried and the setting that chose it."""
    monkeypatch.setenv("BAC_REGISTRY_MIRROR", "127.0.0.1:9")
    with pytest.raises(ImageError) as caught:
        await pull("team/app:1", data_dir)
    error = caught.value
    assert (error.kind, error.registry) == (ImageErrorKind.UNREACHABLE, "127.0.0.1:9")
    assert "registry 127.0.0.1:9 unreachable" in str(error)
    assert str(error).endswith("(it is the mirror BAC_REGISTRY_MIRROR names for Docker Hub)")


async def test_concurrent_pulls_import_once(registry: Registry, pushed: dict[str, str],
                                            test_image: SampleImage, data_dir: Path) -> None:
    """Two concurrent materializes of one image share one import (the per-digest lock):
    each layer is downloaded once and both get the same complete rootfs."""
    before = [registry.blob_fetches(d) for d in test_image.layer_digests]
    first, second = await asyncio.gather(pull(f"{registry.host}/team/app:1", data_dir),
                                         pull(f"{registry.host}/team/app:1", data_dir))
    assert first == second
    after = [registry.blob_fetches(d) for d in test_image.layer_digests]
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1]
    check_test_image(first, test_image)
    assert leftovers(data_dir) == []


async def test_cancelled_pull_leaves_nothing(registry: Registry, pushed: dict[str, str],
                                             test_image: SampleImage, data_dir: Path) -> None:
    """Cancelling a pull while skopeo downloads kills and reaps skopeo and removes every
    temporary file; the next pull then works."""
    task: asyncio.Task[object] | None = None

    def cancel_on_download(line: str) -> None:
        if line.startswith("Copying blob") and task is not None:
            task.cancel()

    task = asyncio.ensure_future(materialize_image(
        FromImage(f"{registry.host}/team/app:1"), data_dir=data_dir, id_range=IdRange(),
        progress=cancel_on_download, registries=LOOPBACK))
    with pytest.raises(asyncio.CancelledError):
        await task
    assert tool_children() == []
    assert leftovers(data_dir) == []
    assert not list((data_dir / "images").glob("sha256-*"))
    check_test_image(await pull(f"{registry.host}/team/app:1", data_dir), test_image)


@pytest.mark.parametrize("ref", ["team/missing:1", "team/app:no-such-tag"])
async def test_missing_image_is_not_found(registry: Registry, pushed: dict[str, str],
                                          data_dir: Path, ref: str) -> None:
    """A repository or tag the registry does not have (404) is 'not found', naming it."""
    with pytest.raises(ImageError) as caught:
        await pull(f"{registry.host}/{ref}", data_dir)
    assert caught.value.kind is ImageErrorKind.NOT_FOUND
    assert ref in str(caught.value) and leftovers(data_dir) == []


async def test_credentials(auth_registry: Registry, test_image: SampleImage,
                           data_dir: Path) -> None:
    """A private registry refuses anonymous and wrong credentials ('unauthorized'), accepts
    the right ones, never shows the password, and a cached private image is not handed to
    a later request without credentials."""
    digest = auth_registry.push(test_image.oci_ref, "private/app:1")
    ref = f"{auth_registry.host}/private/app:1"
    for username, password in ((None, None), (AUTH[0], "wrong")):
        lines: list[str] = []
        with pytest.raises(ImageError) as caught:
            await pull(ref, data_dir, lines, username, password)
        assert caught.value.kind is ImageErrorKind.UNAUTHORIZED, caught.value
    lines = []
    image = await pull(ref, data_dir, lines, *AUTH)
    assert image.digest == digest
    assert not any(AUTH[1] in line for line in lines)
    for anonymous in (ref, f"{auth_registry.host}/private/app@{digest}"):
        with pytest.raises(ImageError) as caught:
            await pull(anonymous, data_dir)
        assert caught.value.kind is ImageErrorKind.UNAUTHORIZED
    assert leftovers(data_dir) == []


async def test_unreachable_registry(data_dir: Path) -> None:
    """Nothing listening on the port: 'unreachable', naming the registry."""
    with pytest.raises(ImageError) as caught:
        await pull("127.0.0.1:9/team/app:1", data_dir)
    assert caught.value.kind is ImageErrorKind.UNREACHABLE and "127.0.0.1:9" in str(caught.value)


async def test_wrong_architecture_refused_before_download(
        registry: Registry, pushed: dict[str, str], arm_image: SampleImage,
        data_dir: Path) -> None:
    """An arm64 image is refused with a clear error before any layer is downloaded."""
    with pytest.raises(ImageError) as caught:
        await pull(f"{registry.host}/team/arm:1", data_dir)
    assert caught.value.kind is ImageErrorKind.ARCHITECTURE and "arm64" in str(caught.value)
    assert registry.blob_fetches(arm_image.layer_digests[0]) == 0


@pytest.mark.parametrize(("host", "plain_http"), [
    ("127.0.0.1:5000", True), ("127.9.9.9", True), ("[::1]:5000", True),
    ("localhost:5000", True), ("10.0.0.1:5000", False), ("registry.example.com", False),
    ("localhost.example.com:5000", False)])
def test_plain_http_only_on_loopback(host: str, plain_http: bool) -> None:
    """Only a loopback registry may be spoken to without TLS."""
    ref = parse_image_ref(f"{host}/team/app:1")
    assert isinstance(ref, RegistryImage) and ref.plain_http_allowed is plain_http


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}",
                                  "127.0.0.2:{port}"])
async def test_registry_on_this_machine_is_refused_unasked(host: str, data_dir: Path) -> None:
    """FROM a registry on the loopback (by address or by a name resolving there) fails as
    forbidden before any connection: the port never sees one, and the message holds
    nothing a service there would answer."""
    with listener() as (port, connections):
        ref = f"{host.format(port=port)}/team/app:1"
        with pytest.raises(ImageError) as caught:
            await pull(ref, data_dir, registries=RegistryAccess())
        assert connections() == 0
    assert caught.value.kind is ImageErrorKind.FORBIDDEN, caught.value
    assert "BAC_REGISTRY_ALLOW" in str(caught.value) and "SECRET" not in str(caught.value)
    assert leftovers(data_dir) == []


@pytest.mark.parametrize("host", ["10.0.0.1:5000", "172.16.5.4", "192.168.1.1:443",
                                  "169.254.169.254", "100.64.0.1", "[fd00::1]:5000",
                                  "[::ffff:127.0.0.1]:5000", "10.202.0.7:5000", "0.0.0.0:5000"])
async def test_private_registries_are_refused(host: str, data_dir: Path) -> None:
    """Private, link-local (cloud metadata), CGNAT, ULA, mapped-loopback, pool and
    unspecified addresses are refused the same way."""
    with pytest.raises(ImageError) as caught:
        await pull(f"{host}/team/app:1", data_dir, registries=RegistryAccess())
    assert caught.value.kind is ImageErrorKind.FORBIDDEN, caught.value


async def test_allowed_registry_on_this_machine(registry: Registry, pushed: dict[str, str],
                                                data_dir: Path) -> None:
    """Allowed by host:port (or by a CIDR holding its address), a loopback registry
    serves the build; another port of the same address stays refused."""
    image = await pull(f"{registry.host}/team/app:1", data_dir,
                       registries=RegistryAccess.parse(registry.host))
    assert image.digest == pushed["app"]
    with listener() as (port, connections):
        with pytest.raises(ImageError) as caught:
            await pull(f"127.0.0.1:{port}/team/app:1", data_dir,
                       registries=RegistryAccess.parse(registry.host))
        assert caught.value.kind is ImageErrorKind.FORBIDDEN and connections() == 0
        with pytest.raises(ImageError):
            await pull(f"127.0.0.1:{port}/team/app:1", data_dir,
                       registries=RegistryAccess.parse("127.0.0.1/32"))
        assert connections() > 0  # allowed: asked, and it is no registry
