"""Benchmark: sandbox create -> envd ready, and destroy, for the namespace backend.

Prints p50/p99 for single (sequential) and concurrent creates, cold and from the warm
pool, next to the floor measured in the same run (``<runtime> run`` of /bin/true on the
same rootfs with the same namespaces, seccomp and mounts), and the memory (PSS) of an idle
sandbox including envd. Run as root:

    .venv/bin/python bench/sandbox_create.py [--n 30] [--concurrency 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from _pss import pss_mib, slot_pids  # bench/, beside this script
from _stats import pct
from e2b import AsyncSandbox

from bac_server.backends.base import SandboxSpec, TemplateImage
from bac_server.backends.namespaces import NamespaceBackend, NamespaceConfig, testing
from bac_server.backends.namespaces.slots import (
    Limits,
    SandboxPlan,
    build_config,
    empty_stdin,
    spawn,
    wait_exit,
)
from bac_server.host import IdRange, default_data_dir, prepare_host, remove_tree
from bac_server.host._syscalls import mount, umount
from bac_server.templates import TemplateStore

TARGETS = {"create_p50_ms": 40.0, "concurrent_all_ready_s": 1.5, "idle_pss_mib": 15.0}


def line(label: str, values: list[float], floor: float | None) -> str:
    p50, p99 = pct(values, 0.5), pct(values, 0.99)
    ratio = f"{p50 / floor:6.1f}x" if floor else "      "
    return f"  {label:<44} p50 {p50:8.1f} ms  p99 {p99:8.1f} ms  {ratio} floor  (n={len(values)})"


# -- floor: the runtime alone, /bin/true, same rootfs and the same config --------------

def _floor_bundle(root: Path, rootfs: Path, name: str, envd_bundle: Path, runtime: str) -> Path:
    bundle = root / name
    (bundle / "etc").mkdir(parents=True)
    for item in ("hosts", "hostname", "resolv.conf"):  # the files the config binds over /etc
        (bundle / "etc" / item).write_text("floor\n")
    plan = SandboxPlan(hostname="floor", rootfs=rootfs, netns_path="", cgroup_path=f"/bac/{name}",
                       id_range=IdRange(), limits=Limits(2, 512, 4096, True),
                       allow_setuid=True, envd_bundle=envd_bundle, etc_dir=bundle / "etc",
                       recursive_sys=Path(runtime).name != "crun")
    config = build_config(plan)
    config["process"]["args"] = ["/bin/true"]
    for ns in config["linux"]["namespaces"]:
        ns.pop("path", None)  # the runtime makes the netns itself here
    (bundle / "config.json").write_text(json.dumps(config))
    return bundle


async def _run_floor(runtime: str, bundle: Path, name: str) -> float:
    """``<runtime> run`` in the foreground, started as the backend starts its runtime (never
    with a device as stdio: crun would give it to the sandbox's root)."""
    binary = shutil.which(runtime) or runtime
    argv = [binary, "--root", "/run/bac/bench-floor", "run", "--bundle", str(bundle), name]
    log = bundle / "runtime.out"
    started = time.perf_counter()
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    empty = empty_stdin()
    try:
        pid = spawn(binary, argv, (empty, out, out))
    finally:
        os.close(out)
        os.close(empty)
    code = await wait_exit(pid)
    elapsed = (time.perf_counter() - started) * 1000
    if code != 0:
        raise RuntimeError(f"floor run failed: {log.read_text(errors='replace')}")
    return elapsed


async def measure_floor(runtime: str, template: TemplateImage, data_dir: Path, n: int,
                        concurrency: int) -> tuple[list[float], float]:
    root = data_dir / "bench-floor"
    remove_tree(root)
    root.mkdir(parents=True, mode=0o711)
    os.chown(root, 0, IdRange().base)
    merged, upper, work = root / "rootfs", root / "upper", root / "work"
    for d in (merged, upper, work):
        d.mkdir()
    os.chown(upper, IdRange().base, IdRange().base)
    mount("overlay", str(merged), "overlay", 0,
          f"lowerdir={template.rootfs},upperdir={upper},workdir={work}")
    envd = next((data_dir / "envd").iterdir(), data_dir)
    try:
        names = [f"floor{i}" for i in range(max(n, concurrency))]
        bundles = {name: _floor_bundle(root, merged, name, envd, runtime) for name in names}
        await _run_floor(runtime, bundles[names[0]], "warmup")
        single = [await _run_floor(runtime, bundles[name], name) for name in names[:n]]
        started = time.perf_counter()
        await asyncio.gather(*(_run_floor(runtime, bundles[nm], nm)
                               for nm in names[:concurrency]))
        return single, time.perf_counter() - started
    finally:
        umount(str(merged))
        remove_tree(root)


# -- the backend ------------------------------------------------------------------------

async def timed(make: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await make()
    return (time.perf_counter() - started) * 1000


def idle_pss_mib(backend: NamespaceBackend, sandbox_id: str) -> float:
    slot = (backend.config.claims_dir / sandbox_id).read_text()
    return sum(pss_mib(pid) for pid in slot_pids(slot))


async def run_one_command(backend: NamespaceBackend, sandbox_id: str) -> None:
    """One command through envd's Connect API, as a client would run first."""
    endpoint = await backend.endpoint(sandbox_id)
    sdk = await AsyncSandbox.connect(sandbox_id, debug=True,
                                     sandbox_url=f"http://{endpoint.address}:{endpoint.envd_port}")
    await sdk.commands.run("true")


async def bench_backend(template: TemplateImage, data_dir: Path, *, pool: int, n: int,
                        concurrency: int) -> dict[str, object]:
    config = NamespaceConfig(data_dir=data_dir, pool_size=pool, envd_start_timeout_s=120,
                             envd_init_timeout_s=120)
    backend = NamespaceBackend(config)
    out: dict[str, object] = {}
    try:
        await backend.prepare(template)
        await testing.wait_pool_full(backend, template)
        creates, destroys = [], []
        for _ in range(n):
            sid = "b" + secrets.token_hex(5)
            await testing.wait_pool_full(backend, template)  # measure hand-out, not refill
            creates.append(await timed(lambda s=sid: backend.create(  # type: ignore[misc]
                SandboxSpec(sandbox_id=s, template=template))))
            destroys.append(await timed(lambda s=sid: backend.destroy(s)))  # type: ignore[misc]
        out["single"], out["destroy"] = creates, destroys
        if pool:
            started = time.perf_counter()
            # grow the pool to the burst size, then serve the burst from it
            await testing.set_pool_size(backend, concurrency)
            await testing.wait_pool_full(backend, template)
            out["pool_fill_s"] = time.perf_counter() - started
            await testing.set_pool_size(backend, 0)  # no refilling during the burst
        ids = ["c" + secrets.token_hex(5) for _ in range(concurrency)]
        started = time.perf_counter()
        burst = await asyncio.gather(*(timed(lambda s=s: backend.create(  # type: ignore[misc]
            SandboxSpec(sandbox_id=s, template=template))) for s in ids))
        out["burst_all_s"] = time.perf_counter() - started
        out["burst"] = list(burst)
        out["pss"] = [idle_pss_mib(backend, s) for s in ids]
        used = ids[:10]
        await asyncio.gather(*(run_one_command(backend, s) for s in used))
        out["pss_used"] = [idle_pss_mib(backend, s) for s in used]
        started = time.perf_counter()
        await asyncio.gather(*(backend.destroy(s) for s in ids))
        out["burst_destroy_s"] = time.perf_counter() - started
    finally:
        await backend.close()
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--runtime", default="crun")
    args = parser.parse_args()
    prepare_host()
    template = await TemplateStore().ensure_base()
    data_dir = default_data_dir() / "bench"
    print(f"host: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; runtime "
          f"{shutil.which(args.runtime)}; n={args.n}, burst={args.concurrency}")
    cold = await bench_backend(template, data_dir, pool=0, n=args.n,
                               concurrency=args.concurrency)
    pooled = await bench_backend(template, data_dir, pool=2, n=args.n,
                                 concurrency=args.concurrency)
    floor, floor_burst = await measure_floor(args.runtime, template, data_dir, args.n,
                                             args.concurrency)
    f50 = statistics.median(floor)
    print("\ncreate -> envd ready (single, sequential)")
    print(line(f"floor: {args.runtime} run /bin/true", floor, f50))
    print(line("cold (pool 0)", cold["single"], f50))  # type: ignore[arg-type]
    print(line("warm pool hand-out", pooled["single"], f50))  # type: ignore[arg-type]
    print(line("destroy (cold sandboxes)", cold["destroy"], None))  # type: ignore[arg-type]
    print(f"\n{args.concurrency} concurrent creates, all ready")
    print(f"  floor ({args.runtime} run /bin/true x{args.concurrency}): {floor_burst:6.2f} s")
    for label, data in (("cold", cold), ("warm pool", pooled)):
        ratio = data["burst_all_s"] / floor_burst  # type: ignore[operator]
        print(f"  {label:<12} all ready {data['burst_all_s']:6.2f} s ({ratio:5.1f}x floor); "
              f"per-create p50 {pct(data['burst'], .5):7.1f} ms p99 "  # type: ignore[arg-type]
              f"{pct(data['burst'], .99):7.1f} ms; destroy all "  # type: ignore[arg-type]
              f"{data['burst_destroy_s']:5.2f} s")
    print(f"  warm pool fill to {args.concurrency}: {pooled['pool_fill_s']:.1f} s (background)")
    print("\nidle sandbox memory incl. envd (PSS, sum over the sandbox's processes)")
    for label, pss in (("cold, before any RPC", cold["pss"]),
                       ("cold, after one command", cold["pss_used"]),
                       ("pooled (envd preloaded)", pooled["pss"]),
                       ("pooled, after one command", pooled["pss_used"])):
        print(f"  {label:<28} mean {statistics.mean(pss):5.1f} MiB  "  # type: ignore[arg-type]
              f"max {max(pss):5.1f} MiB  (n={len(pss)})")  # type: ignore[arg-type]
    print("\ntargets: create p50 <= 40 ms, 50 concurrent all ready <= 1.5 s, idle <= 15 MiB PSS")
    remove_tree(data_dir)


if __name__ == "__main__":
    asyncio.run(main())
