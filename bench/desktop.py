"""Desktop sandboxes through the official e2b-desktop SDK, each next to a floor measured
in the same run.

  create → first screenshot   ``Sandbox.create()`` (desktop template) to the first
                              ``screenshot()``'s bytes, restored from the template's
                              start snapshot; floors: a ``base`` sandbox's create to its
                              first command, and the first desktop's (booted: Xvfb, XFCE)
  screenshot                  ``screenshot()`` round trip (scrot, read, remove); floor:
                              ``commands.run("true")``
  click                       ``left_click()`` round trip (one xdotool command); same floor
  idle memory                 the sandbox's memory (its cgroup, envd's metrics) with the
                              desktop up and nothing open, after a few seconds
  pause / resume              ``pause()`` and ``connect()`` with Firefox open

Starts its own Bac server (tests/compat/bac_process.py), as root, with the desktop
template built (scripts/setup). Keep runs short on a shared machine:

    .venv/bin/python bench/desktop.py [-n 3] [--rounds 20] [--no-browser]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "compat"))
sys.path.insert(0, str(Path(__file__).parent))

from _stats import pct
from _warm import wait_start_snapshots
from bac_process import running


def _ms(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def _row(name: str, values: list[float], floor: list[float] | None = None) -> None:
    line = f"{name:28s} p50 {pct(values, 0.5):8.1f} ms  p90 {pct(values, 0.9):8.1f} ms"
    if floor:
        line += (f"   floor p50 {pct(floor, 0.5):7.1f} ms"
                 f"  ratio {pct(values, 0.5) / pct(floor, 0.5):5.1f}x")
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=3, help="desktop creates")
    parser.add_argument("--rounds", type=int, default=20, help="screenshots and clicks")
    parser.add_argument("--no-browser", action="store_true", help="skip the pause with Firefox")
    args = parser.parse_args()
    with running("bench-desktop") as server:
        server.create_key("bench")
        os.environ.update(E2B_API_URL=server.url, E2B_SANDBOX_URL=server.url,
                          E2B_API_KEY=server.keys[0])
        from e2b import Sandbox as Plain
        from e2b_desktop import Sandbox

        # The first create of each built-in boots and has its start snapshot taken; the
        # measured ones are restored (or handed out restored ahead), as in steady use.
        # That first desktop's create to its first screenshot is the boot (Xvfb, XFCE):
        # the floor of the restored ones.
        warm_plain = Plain.create(timeout=60)
        warm_plain.commands.run("true")
        warm_plain.kill()
        started = time.perf_counter()
        warm = Sandbox.create(timeout=60)
        warm.screenshot()
        booted = (time.perf_counter() - started) * 1000
        warm.kill()
        print(f"start snapshots ready: {wait_start_snapshots(server.data_dir, 2)}", flush=True)
        creates, floors = [], []
        for _ in range(args.n):
            started = time.perf_counter()
            plain = Plain.create(timeout=60)
            plain.commands.run("true")
            floors.append((time.perf_counter() - started) * 1000)
            plain.kill()
            started = time.perf_counter()
            made = Sandbox.create(timeout=300)
            made.screenshot()
            creates.append((time.perf_counter() - started) * 1000)
            made.kill()
        _row("create → first screenshot", creates, floors)
        print(f"{'  booted (the first create)':28s} {booted:8.1f} ms  "
              f"restored p50 / booted: {pct(creates, 0.5) / booted:.2f}", flush=True)

        desktop = Sandbox.create(timeout=600)
        try:
            shots = [_ms(desktop.screenshot) for _ in range(args.rounds)]
            clicks = [_ms(lambda: desktop.left_click(900, 600)) for _ in range(args.rounds)]
            runs = [_ms(lambda: desktop.commands.run("true")) for _ in range(args.rounds)]
            _row("screenshot round trip", shots, runs)
            _row("click round trip", clicks, runs)
            time.sleep(5)
            metrics = desktop.get_metrics()
            if metrics:
                print(f"{'idle memory':28s} {metrics[-1].mem_used / 2**20:8.1f} MiB "
                      f"(of {metrics[-1].mem_total / 2**20:.0f} MiB)", flush=True)
            if not args.no_browser:
                desktop.launch("firefox")
                time.sleep(8)
                metrics = desktop.get_metrics()
                if metrics:
                    print(f"{'with firefox open':28s} {metrics[-1].mem_used / 2**20:8.1f} MiB",
                          flush=True)
            pauses, resumes = [], []
            for _ in range(2):
                pauses.append(_ms(desktop.pause))
                resumes.append(_ms(desktop.connect))
            _row("pause" + ("" if args.no_browser else " (firefox open)"), pauses)
            _row("resume" + ("" if args.no_browser else " (firefox open)"), resumes)
        finally:
            desktop.kill()


if __name__ == "__main__":
    main()
