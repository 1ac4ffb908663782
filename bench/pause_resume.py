"""Benchmark: pause and resume of namespace sandboxes, against memory size.

For each size (an idle sandbox, then one whose process holds N MiB of touched memory):

* freezer pause/resume (memory stays resident),
* full-state pause to disk (CRIU dump, memory freed) and resume (restore): until the
  sandbox runs, until envd answers ``/health`` through the sandbox's address, and until
  all its memory is back (a lazy restore copies it in after the processes run),
* a checkpoint taken while running, its size on disk, and a fork from it (new sandbox),

next to the floor measured in the same run: raw ``criu dump`` / ``criu restore`` (eager,
and lazy with ``criu lazy-pages``) of a plain host process holding the same memory (no
container, no namespaces). Each pause is timed once the previous resume has all its
memory back. p50/p99 over ``--n`` rounds. Run as root on a host with CRIU >= 4.2
(scripts/build-criu.sh):

    .venv/bin/python bench/pause_resume.py [--n 10] [--sizes 0,64,200] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from _stats import pct  # bench/, beside this script
from e2b import AsyncSandbox

from bac_server.backends.base import SandboxSpec, TemplateImage
from bac_server.backends.namespaces import NamespaceBackend, NamespaceConfig
from bac_server.backends.namespaces.checkpoint.criu import _lazy_pages
from bac_server.host import default_data_dir, prepare_host, remove_tree
from bac_server.templates import TemplateStore

# BAC_CRIU, as for the server: the CRIU both the backend and the floor run.
CRIU = os.environ.get("BAC_CRIU") or "/usr/local/sbin/criu"
# The targets: resume p50 <= 60 ms at 64 MiB; pause <= 1 s per GiB.
TARGETS = {"resume_p50_ms_64mib": 60.0, "pause_ms_per_gib": 1000.0}
_HOG = ("import mmap, sys, time\n"
        "m = mmap.mmap(-1, {size} << 20, flags=mmap.MAP_PRIVATE)\n"
        "for i in range(0, len(m), 4096): m[i] = 1\n"
        "open('/tmp/hog-ready', 'w').write('ok')\n"
        "while True: time.sleep(1)\n")


def row(label: str, values: list[float], floor: float | None = None) -> dict[str, object]:
    p50, p99 = pct(values, 0.5), pct(values, 0.99)
    ratio = f"{p50 / floor:5.1f}x floor" if floor else ""
    print(f"  {label:<40} p50 {p50:8.1f} ms  p99 {p99:8.1f} ms  {ratio}  (n={len(values)})")
    return {"label": label, "p50_ms": round(p50, 2), "p99_ms": round(p99, 2), "n": len(values)}


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await fn()
    return (time.perf_counter() - started) * 1000


# -- floor: CRIU alone on a plain host process -------------------------------------------

def _reap(proc: subprocess.Popen[bytes], pid: int) -> None:
    """Collect the dumped process. The first is our child; restored ones are re-parented
    to us because the backend made this process a child subreaper."""
    if proc.poll() is None:
        proc.wait()
        return
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        deadline = time.monotonic() + 10  # not ours: wait for its reaper (no event for it)
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.005)


def _restore_lazily(images: Path) -> float:
    """``criu restore --lazy-pages`` next to a ``criu lazy-pages`` daemon: ms to running."""
    work = images.with_name(images.name + "-work")
    work.mkdir()
    daemon = subprocess.Popen([CRIU, "lazy-pages", "-D", str(images), "-W", str(work),
                               "-o", "lazy.log"], stdin=subprocess.DEVNULL)
    while not (work / "lazy-pages.socket").exists():  # the daemon signals nothing else
        time.sleep(0.001)
    started = time.perf_counter()
    subprocess.run([CRIU, "restore", "-D", str(images), "-W", str(work), "--shell-job", "-d",
                    "--lazy-pages", "-o", "restore.log"], check=True, capture_output=True)
    took = (time.perf_counter() - started) * 1000
    daemon.wait()
    shutil.rmtree(work)
    return took


def raw_criu(size_mib: int, n: int) -> tuple[list[float], list[float], list[float], int]:
    """``criu dump`` / ``criu restore -d`` (eager, then lazy) of a python holding
    ``size_mib``: times and image size."""
    dumps, restores, lazy, image = [], [], [], 0
    work = Path(tempfile.mkdtemp(prefix="bac-criu-floor-"))
    script = work / "hog.py"
    # An idle sandbox is compared with a process holding 1 MiB (mmap of 0 bytes fails).
    held = max(size_mib, 1)
    script.write_text(_HOG.format(size=held).replace("/tmp/hog-ready", str(work / "ready")))
    proc = subprocess.Popen([sys.executable, "-S", str(script)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    pid = proc.pid
    try:
        deadline = time.monotonic() + 60
        while not (work / "ready").exists():  # the process signals nothing else
            if time.monotonic() > deadline:
                raise RuntimeError("hog did not start")
            time.sleep(0.01)
        for i in range(2 * n):  # even rounds restore eagerly, odd ones lazily
            images = work / f"img{i}"
            images.mkdir()
            started = time.perf_counter()
            subprocess.run([CRIU, "dump", "-t", str(pid), "-D", str(images), "--shell-job",
                            "-o", "dump.log"], check=True, capture_output=True)
            dumps.append((time.perf_counter() - started) * 1000)
            _reap(proc, pid)  # a zombie keeps the pid, and the restore needs that pid
            image = sum(f.stat().st_size for f in images.iterdir())
            if i % 2:
                lazy.append(_restore_lazily(images))
            else:
                started = time.perf_counter()
                subprocess.run([CRIU, "restore", "-D", str(images), "--shell-job", "-d",
                                "-o", "restore.log"], check=True, capture_output=True)
                restores.append((time.perf_counter() - started) * 1000)
            shutil.rmtree(images)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if proc.poll() is None:
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)
    return dumps, restores, lazy, image


# -- the backend ---------------------------------------------------------------------------

async def hog(backend: NamespaceBackend, spec: SandboxSpec, size_mib: int) -> None:
    if size_mib == 0:
        return
    endpoint = await backend.endpoint(spec.sandbox_id)
    sdk = await AsyncSandbox.connect(spec.sandbox_id, debug=True,
                                     sandbox_url=f"http://{endpoint.address}:49983")
    await sdk.files.write("/tmp/hog.py", _HOG.format(size=size_mib))
    await sdk.commands.run("python3 -S /tmp/hog.py", background=True)
    await sdk.commands.run("until [ -e /tmp/hog-ready ]; do sleep 0.02; done", timeout=60)


async def measure(backend: NamespaceBackend, template: TemplateImage, size_mib: int,
                  n: int) -> dict[str, object]:
    spec = SandboxSpec(sandbox_id=f"bench{size_mib}m{os.getpid()}", template=template,
                       memory_mb=max(512, size_mib + 256))
    await backend.create(spec)
    try:
        await hog(backend, spec, size_mib)
        freeze_p, freeze_r, pause, resume, answered, settled, ckpt, fork = \
            [], [], [], [], [], [], [], []
        size = 0
        health = f"http://{(await backend.endpoint(spec.sandbox_id)).address}:49983/health"

        async def settle() -> None:
            await _lazy_pages.settle((backend.config.claims_dir / spec.sandbox_id).read_text())

        async with httpx.AsyncClient(trust_env=False) as client:
            for _round in range(n):
                freeze_p.append(await timed(lambda: backend.pause(spec.sandbox_id)))
                freeze_r.append(await timed(lambda: backend.resume(spec.sandbox_id)))
                pause.append(await timed(lambda: backend.suspend(spec.sandbox_id,
                                                                 memory=True)))
                resume.append(await timed(lambda: backend.wake(spec)))
                answered.append(resume[-1] + await timed(lambda: client.get(health)))
                settled.append(answered[-1] + await timed(settle))
        for i in range(max(1, n // 3)):
            started = time.perf_counter()
            info = await backend.checkpoint(spec.sandbox_id, f"bench{i}{os.getpid()}",
                                            memory=True)
            ckpt.append((time.perf_counter() - started) * 1000)
            size = info.size_bytes
            copy = SandboxSpec(sandbox_id=f"benchfork{i}{os.getpid()}", template=template,
                               memory_mb=spec.memory_mb)
            started = time.perf_counter()
            await backend.create_from(copy, info.checkpoint_id, source_token=None)
            fork.append((time.perf_counter() - started) * 1000)
            await backend.destroy(copy.sandbox_id)
            await backend.delete_checkpoint(info.checkpoint_id)
    finally:
        await backend.destroy(spec.sandbox_id)
    dumps, restores, lazy, image = raw_criu(size_mib, n)
    print(f"{size_mib} MiB held by a process (checkpoint on disk: {size / 2**20:.1f} MiB; "
          f"raw CRIU image {image / 2**20:.1f} MiB)")
    return {
        "size_mib": size_mib, "checkpoint_bytes": size, "raw_image_bytes": image,
        "rows": [
            row("freezer pause", freeze_p), row("freezer resume", freeze_r),
            row("pause to disk (CRIU)", pause, pct(dumps, 0.5)),
            row("resume from disk: running", resume, pct(restores, 0.5)),
            row("resume from disk: envd answers", answered, pct(restores, 0.5)),
            row("resume from disk: all memory back", settled, pct(restores, 0.5)),
            row("checkpoint while running", ckpt, pct(dumps, 0.5)),
            row("fork (new sandbox from checkpoint)", fork, pct(restores, 0.5)),
            row("floor: raw criu dump", dumps), row("floor: raw criu restore", restores),
            row("floor: raw criu restore --lazy-pages", lazy),
        ],
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--sizes", default="0,64,200", help="MiB held, comma-separated")
    parser.add_argument("--json", action="store_true", help="also print results as JSON")
    args = parser.parse_args()
    prepare_host()
    template = await TemplateStore().ensure_base()
    data_dir = default_data_dir() / "tests" / f"bench-pause-{os.getpid()}"
    backend = NamespaceBackend(NamespaceConfig(data_dir=data_dir, runtime="runc", pool_size=0,
                                               criu=CRIU))
    results = []
    try:
        await backend.list()
        if not backend.memory_checkpoints:
            raise SystemExit("no CRIU >= 4.2: run scripts/build-criu.sh")
        for size in (int(s) for s in args.sizes.split(",")):
            results.append(await measure(backend, template, size, args.n))
    finally:
        await backend.close()
        remove_tree(data_dir)
    print(f"targets: {TARGETS}")
    if args.json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
