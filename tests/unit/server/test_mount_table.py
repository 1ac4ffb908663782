"""Reading the mount table: only the lines about a path are parsed, and what is kept is
exactly what the whole table says of that path (escapes, a sibling sharing its prefix)."""

from __future__ import annotations

from pathlib import Path

from bac_server.host import mount_table, mounts_under

_LINES = [
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw",
    "90 22 0:50 / /var/lib/bac/sandboxes/s1/rootfs rw - overlay overlay rw,lowerdir=/x",
    "91 90 0:51 / /var/lib/bac/sandboxes/s1/rootfs/proc rw - proc proc rw",
    "92 22 7:3 / /var/lib/bac/sandboxes/s10/disk rw - ext4 /dev/loop3 rw",
    "93 22 0:52 / /var/lib/bac/sandboxes/s\\0402/rootfs rw - tmpfs tmpfs rw",
]


def test_only_the_path_and_what_is_below_it(tmp_path: Path) -> None:
    table = tmp_path / "mountinfo"
    table.write_text("\n".join(_LINES) + "\n")
    whole = mount_table(table)
    kept = mount_table(table, containing="/var/lib/bac/sandboxes/s1")
    assert [m.mount_point for m in kept] == [
        "/var/lib/bac/sandboxes/s1/rootfs", "/var/lib/bac/sandboxes/s1/rootfs/proc",
        "/var/lib/bac/sandboxes/s10/disk"]  # a superset: mounts_under tells them apart
    assert all(m in whole for m in kept)
    root = Path("/var/lib/bac/sandboxes/s1")
    assert mounts_under(root, kept) == mounts_under(root, whole) == [
        "/var/lib/bac/sandboxes/s1/rootfs", "/var/lib/bac/sandboxes/s1/rootfs/proc"]
    spaced = mount_table(table, containing="/var/lib/bac/sandboxes/s 2")
    assert [m.mount_point for m in spaced] == ["/var/lib/bac/sandboxes/s 2/rootfs"]


def test_the_host_table_agrees_with_itself() -> None:
    whole = mount_table()
    assert mounts_under(Path("/proc")) == mounts_under(Path("/proc"), whole)
