"""envd's spawn of one command, by each method, interleaved A/B in one run.

Times ``bac_envd.process._spawn.spawn`` of ``true`` (pipes, as ``commands.run`` starts a
command) until the child is reaped, in a process that has imported envd's RPC stack (as
envd has by its first command, so a fork copies as much as envd's would):
  preexec   fork, the OOM score and credential switch in Python in the child (the code
            before issue 21's change, still used where the helper is not built)
  helper    vfork of bac-spawn, which does the same steps and execs the command
  bare      vfork straight to the command: no OOM score, no switch (the floor; not a
            method envd may use)
Each round runs every method once, in turn, so load on a shared machine hits them alike.
Run as root (the credential switch is to ``--user``). Inside a sandbox: upload this file,
``src/bac_envd`` and the built helper, and run it with ``/opt/bac/lib`` on PYTHONPATH.

    sudo .venv/bin/python bench/envd_spawn.py [-n 500] [--user nobody] [--pty]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

from bac_envd._users import lookup_user
from bac_envd.process import _spawn
from bac_envd.process._env import build_env


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _load_envd_stack() -> None:
    """Import what envd has loaded once it has served a command."""
    import bac_envd._server
    import bac_envd.process._service  # noqa: F401


def _once(method: str, request: _spawn.SpawnRequest) -> float:
    start = time.perf_counter()
    if method == "bare":
        popen = subprocess.Popen(request.argv, env=request.env, cwd=request.cwd,
                                 start_new_session=True, close_fds=True,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        popen.wait()
    else:
        _spawn.HELPER = helper if method == "helper" else None
        spawned = _spawn.spawn(request)
        spawned.popen.wait()
        for fd in (spawned.stdin_fd, spawned.stdout_fd, spawned.stderr_fd, spawned.pty_fd):
            if fd is not None:
                os.close(fd)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=500, help="rounds")
    parser.add_argument("--user", default="nobody")
    parser.add_argument("--pty", action="store_true", help="a PTY instead of pipes")
    args = parser.parse_args()
    global helper
    if _spawn.HELPER is None:
        raise SystemExit(f"no {_spawn.HELPER_NAME} next to {_spawn.__file__}")
    helper = _spawn.HELPER
    _load_envd_stack()
    user = lookup_user(args.user)
    request = _spawn.SpawnRequest(
        argv=["true"], env=build_env(user, {}, {}), cwd="/", user=user,
        pty_size=(80, 24) if args.pty else None, stdin=True)
    methods = ("preexec", "helper", "bare")
    samples: dict[str, list[float]] = {m: [] for m in methods}
    for _ in range(20):  # warm-up
        for method in methods:
            _once(method, request)
    for _ in range(args.n):
        for method in methods:
            samples[method].append(_once(method, request))
    rss = next(line for line in open("/proc/self/status") if line.startswith("VmRSS"))
    print(f"spawn of 'true' as {args.user} ({'pty' if args.pty else 'pipes'}), n={args.n} "
          f"each, interleaved; this process's {' '.join(rss.split())}")
    for method in methods:
        values = samples[method]
        print(f"  {method:<8} p50 {statistics.median(values):6.3f} ms"
              f"   p99 {_pct(values, 0.99):6.3f} ms")


helper = ""

if __name__ == "__main__":
    main()
