"""Loop devices asked for at once by several processes and threads (a burst of creates on
node agents that share a machine): every one gets its own device, none is refused. (Without
the lock on /dev/loop-control, 4 x 40 ran out of retries in two runs of three here.)"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

PROCESSES = 4
THREADS = 40

# Each process: THREADS threads, released together, each attaching its own image and
# holding the device until every thread of the process has one; prints the devices.
_CHILD = textwrap.dedent("""
    import os, sys, threading
    from bac_server.host._loop import loop_device

    root, tag, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    start = threading.Barrier(threads)
    held = threading.Barrier(threads)
    got, failed = [], []

    def attach(i):
        path = os.path.join(root, f"{tag}-{i}.img")
        with open(path, "wb") as f:
            f.truncate(1 << 20)
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            start.wait()
            try:
                with loop_device(fd, path) as device:
                    got.append(device)
                    try:
                        held.wait()
                    except threading.BrokenBarrierError:
                        pass  # another thread failed: said below
            except OSError as exc:
                failed.append(repr(exc))
                held.abort()
        finally:
            os.close(fd)

    workers = [threading.Thread(target=attach, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print(" ".join(got))
    if failed:
        print(failed[0], file=sys.stderr)
        sys.exit(1)
""")


def test_devices_asked_for_at_once_by_processes_and_threads_are_all_given(
        tmp_path: Path) -> None:
    children = [subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path), f"p{n}",
                                  str(THREADS)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for n in range(PROCESSES)]
    outputs = [child.communicate(timeout=120) for child in children]
    for child, (_, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err
    devices = [d for out, _ in outputs for d in out.split()]
    assert len(devices) == PROCESSES * THREADS
    # Devices are given back between processes (autoclear): distinct within each process.
    for out, _ in outputs:
        assert len(set(out.split())) == THREADS
    attached = {p.name for p in Path("/sys/block").glob("loop*")
                if (p / "loop" / "backing_file").exists()
                and (p / "loop" / "backing_file").read_text().startswith(str(tmp_path))}
    assert attached == set(), f"devices left attached: {attached}"
