"""Host preparation is idempotent; the template store builds, finds and shifts correctly."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
from pathlib import Path

import pytest

from bac_server.backends.base import TemplateImage, TemplateNotFound
from bac_server.host import (
    CgroupLayout,
    HostSettings,
    IdRange,
    dynamic_migrations_favored,
    is_mount_point,
    mount_table,
    prepare_host,
    table_present,
)
from bac_server.host._syscalls import MNT_DETACH, MS_BIND, mount, umount
from bac_server.templates import TemplateBuildError, TemplateStore, base_recipe
from bac_server.templates._idshift import shift_ownership

pytestmark = [pytest.mark.root]


def test_prepare_host_is_idempotent(template: TemplateImage) -> None:
    """A second prepare_host changes nothing and leaves crun's cgroup layout and the table."""
    report = prepare_host()
    assert report.sysctls_changed == {}
    assert report.cgroup_layout is not CgroupLayout.HYBRID
    assert table_present()
    rules = subprocess.run(["nft", "list", "table", "inet", "bac"], capture_output=True,
                           text=True, check=True).stdout
    assert "fib saddr . iif oif missing drop" in rules
    assert "ct state new iifname @egress jump decide" in rules and "masquerade" in rules


def _cgroup2_options() -> tuple[str, list[str]] | None:
    for entry in mount_table():
        if entry.fs_type == "cgroup2" and entry.mount_point.startswith("/sys/fs/cgroup"):
            return entry.mount_point, entry.super_options.split(",")
    return None


def test_prepare_host_favors_dynamic_cgroup_migrations() -> None:
    """prepare_host sets favordynmods on the cgroup2 mount (keeping its other flags) unless
    told not to; a host without the option gets it back at the next preparation."""
    found = _cgroup2_options()
    if found is None:
        pytest.skip("no cgroup2 mount on this host")
    target, options = found
    kept = [o for o in options if o not in ("rw", "favordynmods")]
    mount("none", target, None, 0x20, ",".join(kept))  # MS_REMOUNT without the option
    try:
        prepare_host(HostSettings(favor_dynamic_cgroups=False))
        assert not dynamic_migrations_favored()
        prepare_host()
        if not dynamic_migrations_favored():
            pytest.skip("this kernel has no favordynmods (Linux < 6.0)")
        after = _cgroup2_options()
        assert after is not None and set(kept) <= set(after[1])
    finally:
        with contextlib.suppress(OSError):  # as the server's own preparation leaves it
            mount("none", target, None, 0x20, ",".join([*kept, "favordynmods"]))


def test_base_template_is_built_and_shifted(template: TemplateImage) -> None:
    """The base rootfs has the user, sudo rule and ownership shifted to the sandbox range."""
    ids = IdRange()
    rootfs = template.rootfs
    assert rootfs.stat().st_uid == ids.base
    assert (rootfs / "home/user").stat().st_uid == ids.base + 1000
    sudo = (rootfs / "usr/bin/sudo").stat()
    assert sudo.st_uid == ids.base and sudo.st_mode & stat.S_ISUID
    assert "user ALL=(ALL:ALL) NOPASSWD: ALL" in (rootfs / "etc/sudoers.d/90-bac-user").read_text()
    assert (rootfs / "usr/bin/python3").exists() and (rootfs / "usr/bin/git").exists()


async def test_store_lookup(template: TemplateImage) -> None:
    """get('base') finds the build for the current recipe; unknown ids raise TemplateNotFound."""
    store = TemplateStore()
    assert (await store.get("base")).rootfs == template.rootfs
    assert template.rootfs.parent.name == base_recipe(IdRange().base).digest()
    with pytest.raises(TemplateNotFound):
        await store.get("no-such-template")
    empty = TemplateStore(Path("/nonexistent-bac-data"))
    with pytest.raises(TemplateNotFound, match="not built"):
        await empty.get("base")


def test_recipe_digest_tracks_the_recipe() -> None:
    """The build is keyed by the recipe: a different id range gives a different digest."""
    assert base_recipe(100_000).digest() == base_recipe(100_000).digest()
    assert base_recipe(100_000).digest() != base_recipe(200_000).digest()


def test_shift_keeps_setuid_and_shifts_hard_links_once(tmp_path: Path) -> None:
    """Shifting preserves setuid bits (chown clears them) and shifts hard links once."""
    tree = tmp_path / "tree"
    tree.mkdir()
    tool = tree / "tool"
    tool.write_text("x")
    os.chown(tool, 0, 0)
    tool.chmod(0o4755)
    os.link(tool, tree / "tool-link")
    (tree / "link").symlink_to("tool")
    (tree / "user-file").write_text("u")
    os.chown(tree / "user-file", 1000, 1000)
    shift_ownership(tree, 100_000, 65_536)
    info = tool.stat()
    assert (info.st_uid, info.st_gid) == (100_000, 100_000)
    assert info.st_mode & stat.S_ISUID
    assert (tree / "user-file").stat().st_uid == 101_000
    assert (tree / "link").lstat().st_uid == 100_000


def test_shift_refuses_file_capabilities(tmp_path: Path) -> None:
    """A file capability embeds a host id that cannot be shifted: the build fails."""
    tree = tmp_path / "tree"
    tree.mkdir()
    binary = tree / "ping"
    binary.write_text("x")
    # VFS_CAP_REVISION_2 with CAP_NET_RAW permitted and effective
    os.setxattr(binary, "security.capability",
                bytes.fromhex("01000002") + (1 << 13).to_bytes(4, "little") + bytes(12))
    with pytest.raises(TemplateBuildError, match=r"security\.capability"):
        shift_ownership(tree, 100_000, 65_536)


def test_mount_points_are_recognised(tmp_path: Path) -> None:
    """A mount of another file system is seen from two stats, a bind of the same file
    system from the mount table; a plain directory or file, or a missing path, is none."""
    plain, tmpfs, bound, missing = (tmp_path / n for n in ("plain", "tmpfs", "bound", "gone"))
    for directory in (plain, tmpfs, bound):
        directory.mkdir()
    (plain / "file").write_text("x")
    mount("tmpfs", str(tmpfs), "tmpfs", 0, "size=1m")
    mount(str(plain), str(bound), "", MS_BIND, "")
    try:
        assert is_mount_point(tmpfs) and is_mount_point(bound)
        assert not is_mount_point(plain) and not is_mount_point(plain / "file")
        assert not is_mount_point(missing)
    finally:
        umount(str(bound), MNT_DETACH)
        umount(str(tmpfs), MNT_DETACH)
    assert not is_mount_point(tmpfs) and not is_mount_point(bound)
