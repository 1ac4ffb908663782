"""Suspend, wake, checkpoints and copies of runc sandboxes (CRIU), on real sandboxes."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import pytest
from backend_harness import (
    Sandbox,
    SandboxFactory,
    data_dir_leftovers,
    footprint,
    leftovers,
    new_id,
    slot_record,
)
from e2b import PtySize
from runc_fixtures import ECHO_SERVER, criu_of, runc_fixtures, second_backend

from bac_server.backends.base import (
    Checkpointable,
    CheckpointNotFound,
    SandboxSpec,
    SandboxStatus,
    TemplateImage,
)
from bac_server.backends.namespaces import NamespaceBackend
from bac_server.host import mounts_under, remove_tree
from bac_server.host._syscalls import umount

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

_COUNTER = "i=0; while true; do i=$((i+1)); echo $i >> /home/user/count; sleep 0.05; done"
# Holds one connection to the echo server over the loopback; on each request (a file)
# sends a line on that same connection and records whether the echo came back.
_LOOPBACK_CLIENT = ("import os, socket, time\n"
                    "c = socket.create_connection(('127.0.0.1', 7000))\n"
                    "open('/tmp/lo-ready', 'w').close()\n"
                    "while True:\n"
                    "    if os.path.exists('/tmp/lo-ask'):\n"
                    "        os.unlink('/tmp/lo-ask')\n"
                    "        try:\n"
                    "            c.sendall(b'again')\n"
                    "            ok = c.recv(100) == b'AGAIN'\n"
                    "        except OSError:\n"
                    "            ok = False\n"
                    "        open('/tmp/lo-result', 'w').write('ok' if ok else 'closed')\n"
                    "    time.sleep(0.02)\n")
# Takes one connection, waits for the client's half-close, then answers once asked.
_HALF_CLOSED = ("import os, socket, time\n"
                "s = socket.socket()\n"
                "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                "s.bind(('0.0.0.0', 7001))\n"
                "s.listen()\n"
                "open('/tmp/half-ready', 'w').close()\n"
                "c, _ = s.accept()\n"
                "if c.recv(100) == b'':\n"
                "    open('/tmp/half-eof', 'w').close()\n"
                "while not os.path.exists('/tmp/half-go'):\n"
                "    time.sleep(0.02)\n"
                "c.sendall(b'late reply')\n"
                "c.close()\n")
# Holds 48 MiB of private memory with a known pattern; checks it when asked (a file).
_MEMORY = ("import hashlib, mmap, os, time\n"
           "m = mmap.mmap(-1, 48 << 20, flags=mmap.MAP_PRIVATE)\n"
           "for i in range(0, len(m), 4096):\n"
           "    m[i:i + 8] = (i * 2654435761 % 2**64).to_bytes(8, 'little')\n"
           "want = hashlib.sha256(m).hexdigest()\n"
           "open('/tmp/mem-ready', 'w').close()\n"
           "while True:\n"
           "    if os.path.exists('/tmp/mem-check'):\n"
           "        os.unlink('/tmp/mem-check')\n"
           "        ok = hashlib.sha256(m).hexdigest() == want\n"
           "        open('/tmp/mem-result', 'a').write('ok\\n' if ok else 'BAD\\n')\n"
           "    time.sleep(0.02)\n")


runc_pair, runc, make = runc_fixtures("runc")


async def _last_count(sbx: Sandbox) -> int:
    return int((await sbx.run("tail -n1 /home/user/count")).stdout)


async def _counting(sbx: Sandbox) -> int:
    """Start the counter and wait until it has written; returns its pid."""
    handle = await sbx.sdk.commands.run(_COUNTER, background=True)
    await sbx.run("until [ -s /home/user/count ]; do sleep 0.01; done")
    return handle.pid


async def test_backend_is_checkpointable(runc: NamespaceBackend) -> None:
    """The runc backend offers the capability, with memory, on a host with CRIU."""
    assert isinstance(runc, Checkpointable)
    assert runc.memory_checkpoints


async def test_suspend_keeps_processes_files_and_listeners(runc: NamespaceBackend,
                                                           make: SandboxFactory) -> None:
    """Suspend with memory ends every process; wake brings back the same processes (same
    pids, counting on), files, a listening server and a PTY that can be re-attached."""
    sbx = await make()
    counter = await _counting(sbx)
    server = await sbx.sdk.commands.run("python3 -m http.server 8000 --directory /home/user",
                                        background=True)
    await sbx.run("until python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", "
                  "8000))' 2>/dev/null; do sleep 0.02; done")
    pty = await sbx.sdk.pty.create(PtySize(rows=24, cols=80), on_data=lambda _d: None,
                                   timeout=0)
    await sbx.sdk.files.write("/home/user/note.txt", "before")
    before = await _last_count(sbx)

    await runc.suspend(sbx.id, memory=True)
    assert await runc.status(sbx.id) is SandboxStatus.PAUSED
    # Memory freed: no task is left (the cgroups the wake needs are made ahead, empty).
    assert footprint(runc, sbx.id).processes == (), "memory must be freed"
    await runc.wake(SandboxSpec(sandbox_id=sbx.id, template=make.template))

    assert await runc.status(sbx.id) is SandboxStatus.RUNNING
    pids = {p.pid for p in await sbx.sdk.commands.list()}
    assert {counter, server.pid, pty.pid} <= pids
    assert await sbx.sdk.files.read("/home/user/note.txt") == "before"
    await sbx.run("sleep 0.2")
    assert await _last_count(sbx) > before
    page = await sbx.run("python3 -c 'import urllib.request as u; "
                         "print(u.urlopen(\"http://127.0.0.1:8000/\").status)'")
    assert page.stdout.strip() == "200"
    seen, echoed = bytearray(), asyncio.Event()

    def on_data(data: bytes) -> None:
        seen.extend(data)
        if b"pty-42" in seen:
            echoed.set()

    attached = await sbx.sdk.pty.connect(pty.pid, on_data=on_data, timeout=0)
    await sbx.sdk.pty.send_stdin(pty.pid, b"echo pty-$((40+2))\n")
    await asyncio.wait_for(echoed.wait(), 20)
    await attached.disconnect()


async def test_suspend_without_memory_keeps_files_only(runc: NamespaceBackend,
                                                       make: SandboxFactory) -> None:
    """A files-only suspend ends the processes; wake starts envd afresh on the same files."""
    sbx = await make()
    counter = await _counting(sbx)
    await sbx.sdk.files.write("/home/user/kept.txt", "kept")
    await runc.suspend(sbx.id, memory=False)
    assert await runc.status(sbx.id) is SandboxStatus.PAUSED
    await runc.wake(SandboxSpec(sandbox_id=sbx.id, template=make.template))
    assert await sbx.sdk.files.read("/home/user/kept.txt") == "kept"
    assert counter not in {p.pid for p in await sbx.sdk.commands.list()}
    assert (await sbx.run("hostname")).stdout.strip() == sbx.id


async def test_restore_rolls_files_and_memory_back(runc: NamespaceBackend,
                                                   make: SandboxFactory) -> None:
    """Restoring checkpoint 1 of 2 brings back its files and its processes' memory: the
    counter continues from where it was then, a file made later is gone."""
    sbx = await make()
    await _counting(sbx)
    first = await runc.checkpoint(sbx.id, new_id("c"), memory=True)
    await sbx.run("sleep 0.3; echo later > /home/user/later.txt")
    second = await runc.checkpoint(sbx.id, new_id("c"), memory=True)
    assert first.size_bytes > 0 and second.created_at > first.created_at
    await runc.restore(SandboxSpec(sandbox_id=sbx.id, template=make.template),
                       first.checkpoint_id)
    assert not (await sbx.run("test -e /home/user/later.txt")).exit_code == 0
    values = [int(v) for v in (await sbx.run("cat /home/user/count")).stdout.split()]
    # Files and memory went back together: the file holds the first checkpoint's lines
    # and the restored counter carried on from there, without a jump to later values.
    assert values == list(range(1, len(values) + 1))
    rolled = values[-1]
    await sbx.run("sleep 0.2")
    assert await _last_count(sbx) > rolled  # the restored process counts on
    for info in (first, second):
        await runc.delete_checkpoint(info.checkpoint_id)


async def test_copies_diverge_independently(runc: NamespaceBackend,
                                            make: SandboxFactory) -> None:
    """Three sandboxes started from one checkpoint get their own ids, addresses and
    hostnames, keep the original's processes and files, and diverge from each other."""
    sbx = await make()
    counter = await _counting(sbx)
    await sbx.sdk.files.write("/home/user/origin.txt", "origin")
    info = await runc.checkpoint(sbx.id, new_id("c"), memory=True)
    specs = [SandboxSpec(sandbox_id=new_id("f"), template=make.template) for _ in range(3)]
    make.created.extend(s.sandbox_id for s in specs)
    endpoints = await asyncio.gather(*(runc.create_from(s, info.checkpoint_id,
                                                        source_token=None) for s in specs))
    assert len({e.address for e in endpoints} | {sbx.address}) == 4
    copies = [await make.attach(s, e) for s, e in zip(specs, endpoints, strict=True)]
    for n, copy in enumerate(copies):
        assert (await copy.run("hostname")).stdout.strip() == copy.id
        assert await copy.sdk.files.read("/home/user/origin.txt") == "origin"
        assert counter in {p.pid for p in await copy.sdk.commands.list()}
        await copy.sdk.files.write("/home/user/mine.txt", str(n))
    for n, copy in enumerate(copies):
        assert await copy.sdk.files.read("/home/user/mine.txt") == str(n)
    assert (await sbx.run("test -e /home/user/mine.txt")).exit_code != 0
    await runc.delete_checkpoint(info.checkpoint_id)


async def test_unknown_checkpoint_and_cleanup(runc: NamespaceBackend,
                                              make: SandboxFactory) -> None:
    """Unknown or malformed checkpoint ids are refused; destroying a suspended sandbox
    leaves nothing behind (mounts, pinned namespace, veth, lease, files)."""
    sbx = await make()
    spec = SandboxSpec(sandbox_id=sbx.id, template=make.template)
    for bad in ("nope", "../etc", ""):
        with pytest.raises(CheckpointNotFound):
            await runc.restore(spec, bad)
    fp = footprint(runc, sbx.id)
    await runc.suspend(sbx.id, memory=True)
    await runc.destroy(sbx.id)
    assert leftovers(fp) == []


async def test_suspended_sandbox_survives_a_new_backend(template: TemplateImage,
                                                         runc: NamespaceBackend) -> None:
    """A new backend on the same data directory (a server restart) finds the suspended
    sandbox paused and wakes it with its processes."""
    first, spec, sbx = await second_backend(runc, template, "restart")
    config = first.config
    counter = await _counting(sbx)
    await first.suspend(sbx.id, memory=True)
    await first.close()
    again = NamespaceBackend(config)
    try:
        assert await again.status(sbx.id) is SandboxStatus.PAUSED
        await again.wake(spec)
        assert counter in {p.pid for p in await sbx.sdk.commands.list()}
        await again.destroy(sbx.id)
        assert data_dir_leftovers(again) == []
    finally:
        await again.close()
        remove_tree(config.data_dir)


async def test_wake_deletes_its_images_off_the_resume_path(template: TemplateImage,
                                                              runc: NamespaceBackend) -> None:
    """A wake frees the slot's image paths at once and deletes the images in the
    background (gone once the backend closes); the host lets go of the sandbox's /dev;
    images a stopped server left aside are swept by the next one."""
    first, spec, sbx = await second_backend(runc, template, "discard")
    config = first.config
    counter = await _counting(sbx)
    root = config.sandboxes_dir / slot_record(first, sbx.id).slot
    await first.suspend(sbx.id, memory=True)
    assert any((root / "suspend" / "images").iterdir())
    await first.wake(spec)
    assert not (root / "suspend" / "images").exists() and not (root / "criu-work").exists()
    assert counter in {p.pid for p in await sbx.sdk.commands.list()}
    deadline = asyncio.get_running_loop().time() + 20
    while mounts_under(root / "devfs"):  # detached by a thread of its own
        assert asyncio.get_running_loop().time() < deadline, mounts_under(root / "devfs")
        await asyncio.sleep(0.01)
    await first.destroy(sbx.id)
    await first.close()
    bin_dir = config.data_dir / ".discard"
    assert not bin_dir.exists() or list(bin_dir.iterdir()) == []
    left = bin_dir / "0123-images"
    left.mkdir(parents=True, exist_ok=True)
    (left / "pages-1.img").write_bytes(b"\0" * 4096)
    again = NamespaceBackend(config)
    try:
        await again.list()
        assert list(bin_dir.iterdir()) == []
    finally:
        await again.close()
        remove_tree(config.data_dir)


async def test_runc_sandbox_sees_no_host_mounts_below_sys(make: SandboxFactory) -> None:
    """The flat /sys of checkpointable sandboxes: no cgroupfs, debugfs, securityfs, bpffs,
    tracefs or pstore below it (empty directories), firmware masked, all read-only; the
    escape attempts fail."""
    sbx = await make()
    probe = await sbx.run(
        "for d in /sys/fs/cgroup /sys/kernel/debug /sys/kernel/security /sys/fs/bpf "
        "/sys/kernel/tracing /sys/fs/pstore /sys/firmware; do "
        "echo \"$d $(ls -A $d 2>/dev/null | wc -l)\"; done; "
        "grep -c ' /sys/' /proc/self/mountinfo; "
        "sudo -n sh -c 'echo x > /sys/kernel/uevent_helper' 2>&1; "
        "sudo -n mount -t cgroup -o memory none /mnt 2>&1; echo done", user="user")
    lines = probe.stdout.splitlines()
    assert all(line.endswith(" 0") for line in lines[:7]), lines
    assert "Read-only file system" in probe.stdout or "Permission denied" in probe.stdout
    assert "done" in lines[-1]
    mounts = (await sbx.run("cat /proc/self/mountinfo", user="root")).stdout
    assert not any(" cgroup " in line or " debugfs " in line or " bpf " in line
                   for line in mounts.splitlines()), mounts


async def test_suspended_sandbox_wakes_after_a_simulated_reboot(runc: NamespaceBackend,
                                                                 make: SandboxFactory) -> None:
    """What a reboot takes away — the overlay mount, the pinned network namespace with its
    veth, the address lease in /run — is rebuilt when a suspended sandbox wakes; its
    processes and files come back."""
    sbx = await make()
    counter = await _counting(sbx)
    await sbx.sdk.files.write("/home/user/durable.txt", "durable")
    fp = footprint(runc, sbx.id)
    await runc.suspend(sbx.id, memory=True)
    slot = fp.slot_dir
    umount(str(slot / "rootfs"))
    umount(str(slot / "netns"))  # the namespace ends, and its veth with it
    fp.lease.unlink()
    await runc.wake(SandboxSpec(sandbox_id=sbx.id, template=make.template))
    endpoint = await runc.endpoint(sbx.id)
    again = await make.attach(sbx.spec, endpoint)
    assert await again.sdk.files.read("/home/user/durable.txt") == "durable"
    assert counter in {p.pid for p in await again.sdk.commands.list()}


async def _echo_server(sbx: Sandbox) -> None:
    await sbx.sdk.files.write("/tmp/echo.py", ECHO_SERVER)
    await sbx.sdk.commands.run("python3 /tmp/echo.py", background=True)
    await sbx.run("until [ -e /tmp/echo-ready ]; do sleep 0.02; done")


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    data: bytes) -> bytes:
    writer.write(data)
    await writer.drain()
    return await asyncio.wait_for(reader.readexactly(len(data)), 20)


async def test_established_connection_survives_suspend(runc: NamespaceBackend,
                                                       make: SandboxFactory) -> None:
    """A client on the host connected to a server in the sandbox (through the sandbox's
    address) keeps its connection across a suspend to disk and a wake: bytes flow both
    ways on the same connection afterwards, and new connections are accepted."""
    if (criu := criu_of(runc)) is None or not criu.tcp_repair:
        pytest.skip("this CRIU lacks Bac's patch (scripts/build-criu.sh): connections close")
    sbx = await make()
    await _echo_server(sbx)
    reader, writer = await asyncio.open_connection(sbx.address, 7000)
    try:
        assert await _exchange(reader, writer, b"before") == b"BEFORE"
        await runc.suspend(sbx.id, memory=True)
        assert await runc.status(sbx.id) is SandboxStatus.PAUSED
        await runc.wake(SandboxSpec(sandbox_id=sbx.id, template=make.template))
        assert await _exchange(reader, writer, b"after wake") == b"AFTER WAKE"
        await runc.suspend(sbx.id, memory=True)
        await runc.wake(SandboxSpec(sandbox_id=sbx.id, template=make.template))
        assert await _exchange(reader, writer, b"second cycle") == b"SECOND CYCLE"
    finally:
        writer.close()
    fresh_reader, fresh_writer = await asyncio.open_connection(sbx.address, 7000)
    try:
        assert await _exchange(fresh_reader, fresh_writer, b"new") == b"NEW"
    finally:
        fresh_writer.close()


async def test_half_closed_connection_survives_suspend(runc: NamespaceBackend,
                                                       make: SandboxFactory) -> None:
    """A connection the client has half-closed (the server in CLOSE_WAIT, restored with
    the peer's FIN re-injected) survives a suspend and wake: the server's late answer
    and its close reach the client."""
    if (criu := criu_of(runc)) is None or not criu.tcp_repair:
        pytest.skip("this CRIU lacks Bac's patch (scripts/build-criu.sh): connections close")
    sbx = await make()
    await sbx.sdk.files.write("/tmp/half.py", _HALF_CLOSED)
    await sbx.sdk.commands.run("python3 /tmp/half.py", background=True)
    await sbx.run("until [ -e /tmp/half-ready ]; do sleep 0.02; done")
    reader, writer = await asyncio.open_connection(sbx.address, 7001)
    try:
        writer.write_eof()
        await sbx.run("until [ -e /tmp/half-eof ]; do sleep 0.02; done")
        await runc.suspend(sbx.id, memory=True)
        await runc.wake(SandboxSpec(sandbox_id=sbx.id, template=make.template))
        await sbx.run("touch /tmp/half-go")
        assert await asyncio.wait_for(reader.read(), 20) == b"late reply"
    finally:
        writer.close()


async def test_copy_closes_the_originals_connections(runc: NamespaceBackend,
                                                     make: SandboxFactory) -> None:
    """A connection from outside open when a checkpoint is taken stays with the original;
    the copy made from it has that connection closed, keeps the one between two of its
    own processes over the loopback (with Bac's CRIU), and serves new ones on its own
    address."""
    sbx = await make()
    await _echo_server(sbx)
    await sbx.sdk.files.write("/tmp/lo.py", _LOOPBACK_CLIENT)
    await sbx.sdk.commands.run("python3 /tmp/lo.py", background=True)
    await sbx.run("until [ -e /tmp/lo-ready ]; do sleep 0.02; done")
    reader, writer = await asyncio.open_connection(sbx.address, 7000)
    try:
        assert await _exchange(reader, writer, b"one") == b"ONE"
        info = await runc.checkpoint(sbx.id, new_id("c"), memory=True)
        copy_spec = SandboxSpec(sandbox_id=new_id("f"), template=make.template)
        make.created.append(copy_spec.sandbox_id)
        endpoint = await runc.create_from(copy_spec, info.checkpoint_id, source_token=None)
        assert await _exchange(reader, writer, b"still the original") == b"STILL THE ORIGINAL"
        copy = await make.attach(copy_spec, endpoint)
        # Established sockets on port 7000 (0x1B58) with a peer off the loopback
        # (127.0.0.1 is 0100007F): the host client's connection was restored closed.
        listing = await copy.run("python3 -c \"print(sum(1 for l in "
                                 "open('/proc/net/tcp').readlines()[1:] if l.split()[3] == "
                                 "'01' and l.split()[1].endswith(':1B58') and not "
                                 "l.split()[2].startswith('0100007F')))\"")
        assert listing.stdout.strip() == "0", listing.stdout
        await copy.run("touch /tmp/lo-ask; until [ -e /tmp/lo-result ]; do sleep 0.02; done")
        kept = (await copy.run("cat /tmp/lo-result")).stdout.strip()
        criu = criu_of(runc)
        assert kept == ("ok" if criu is not None and criu.tcp_repair else "closed")
        copy_reader, copy_writer = await asyncio.open_connection(copy.address, 7000)
        try:
            assert await _exchange(copy_reader, copy_writer, b"copy") == b"COPY"
        finally:
            copy_writer.close()
        await runc.delete_checkpoint(info.checkpoint_id)
    finally:
        writer.close()


async def test_restored_sandbox_is_confined_as_before(runc: NamespaceBackend,
                                                      make: SandboxFactory) -> None:
    """After a suspend and wake the sandbox's init has the same seccomp filter count,
    capabilities, no_new_privs, id maps, device rules and cgroups as before, and is in
    its own pinned network namespace."""
    sbx = await make()
    fp = footprint(runc, sbx.id)
    # /dev comes back as a tmpfs of its own with the same entries (made without tar).
    # Not compared: the owner of the mqueue mount's root, which CRIU mounts as host root
    # (unmapped inside) with runc's restore as with this one.
    dev = ("ls -ln --time-style=+ /dev | sed 1d | grep -v ' mqueue$'; "
           "awk '$5 == \"/dev\" {print $6, $(NF-2), $NF}' /proc/self/mountinfo")
    before = _confinement_of(runc, sbx.id)
    dev_before = (await sbx.run(dev, user="root")).stdout
    await runc.suspend(sbx.id, memory=True)
    await runc.wake(SandboxSpec(sandbox_id=sbx.id, template=make.template))
    after = _confinement_of(runc, sbx.id)
    assert after == before
    assert (await sbx.run(dev, user="root")).stdout == dev_before
    assert " tmpfs " in dev_before and "size=65536k" in dev_before
    pid = slot_record(runc, sbx.id).init_pid
    assert os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(fp.slot_dir / "netns").st_ino
    escape = await sbx.run("mknod /tmp/mem c 1 1 2>&1; echo done", user="root")
    assert "Operation not permitted" in escape.stdout and "done" in escape.stdout


def _confinement_of(backend: NamespaceBackend, sandbox_id: str) -> dict[str, object]:
    record = slot_record(backend, sandbox_id)
    pid = record.init_pid
    status = {k: v.strip() for k, _, v in (line.partition(":") for line in
              Path(f"/proc/{pid}/status").read_text().splitlines())}
    relative = record.cgroup_path.strip("/")
    return {
        "status": {k: status[k] for k in ("CapPrm", "CapEff", "CapBnd", "NoNewPrivs",
                                          "Seccomp", "Seccomp_filters")},
        "uid_map": Path(f"/proc/{pid}/uid_map").read_text().split(),
        "cgroups": sorted(line.split(":", 2)[2] for line in
                          Path(f"/proc/{pid}/cgroup").read_text().splitlines()),
        "devices": Path(f"/sys/fs/cgroup/devices/{relative}/devices.list").read_text(),
        "memory": Path(f"/sys/fs/cgroup/memory/{relative}/memory.limit_in_bytes").read_text(),
        "pids": Path(f"/sys/fs/cgroup/pids/{relative}/pids.max").read_text(),
    }


async def _memory_checks(sbx: Sandbox) -> list[str]:
    """Ask the memory holder to verify its pattern; all its answers so far."""
    before = (await sbx.run("cat /tmp/mem-result 2>/dev/null | wc -l")).stdout.strip()
    await sbx.run("touch /tmp/mem-check; until [ $(cat /tmp/mem-result 2>/dev/null | wc -l) "
                  f"-gt {before} ]; do sleep 0.02; done")
    return (await sbx.run("cat /tmp/mem-result")).stdout.split()


def _fd_targets(backend: NamespaceBackend, sandbox_id: str) -> list[str]:
    relative = slot_record(backend, sandbox_id).cgroup_path.strip("/")
    pids = Path(f"/sys/fs/cgroup/pids/{relative}/cgroup.procs").read_text().split()
    targets = []
    for pid in pids:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                    targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return targets


async def test_large_memory_comes_back_intact(runc: NamespaceBackend,
                                              make: SandboxFactory) -> None:
    """A sandbox holding 48 MiB wakes with its memory intact (restored lazily where CRIU
    can), also when suspended again at once; no restored process keeps a userfaultfd."""
    sbx = await make()
    await sbx.sdk.files.write("/tmp/memory.py", _MEMORY)
    await sbx.sdk.commands.run("python3 /tmp/memory.py", background=True)
    await sbx.run("until [ -e /tmp/mem-ready ]; do sleep 0.02; done", limit_s=120)
    spec = SandboxSpec(sandbox_id=sbx.id, template=make.template)
    await runc.suspend(sbx.id, memory=True)
    await runc.wake(spec)
    await runc.suspend(sbx.id, memory=True)  # while the memory may still be coming in
    await runc.wake(spec)
    assert not any("userfaultfd" in target for target in _fd_targets(runc, sbx.id))
    assert await _memory_checks(sbx) == ["ok"]
