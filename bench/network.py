"""Sandbox networking costs, measured against a fake internet of namespaces on this host.

1. setup: what networking adds to a sandbox create — the netns and veth over netlink, then
   the egress policy (one nft transaction) and the resolver's sockets — and its removal;
   and, as the server's namespace stock does it, the egress objects and sockets made
   ahead (``Egress.prepare``) and the policy alone on the create's path;
2. throughput: bytes from a sandbox to a fake-internet host through NAT, forwarding and the
   policy chain (and through the host-name relay, for an address allowed by a domain
   rule), versus the host sending to the same server over the raw veth;
3. gateway: HTTP request latency to a sandbox port through Bac's gateway versus directly
   to the sandbox's address (keep-alive clients, sequential requests);
4. scale (``--scale``, alone): one sandbox's egress policy installed, updated and removed,
   its usage read and a DNS answer pinned, with 10 and then with 1000 other sandboxes'
   policies in the table, in one run; medians, p99s and the ratio 1000/10 (1: constant),
   each with the kernel's part (send to answer). One libnftables command is timed
   alongside for reference (it reads the whole ruleset first). Runs in a network
   namespace of its own: the host's table is never touched.

Needs root and (but for ``--scale``) a built base template; sends traffic only to
namespaces it makes.

    .venv/bin/python bench/network.py [-n 30] [--mbytes 256] [--requests 500]
    .venv/bin/python bench/network.py --scale [--rounds 200] [--sandboxes 10,1000]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import ipaddress
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for extra in ("tests/integration/network", "tests/integration/backend", "tests/compat"):
    sys.path.insert(0, str(ROOT / extra))

from backend_harness import backend_and_factory, base_template, private_data_dir  # noqa: E402
from fake_internet import SITE_A, fake_internet  # noqa: E402

from bac_server.backends.base import TemplateImage  # noqa: E402
from bac_server.backends.egress import EgressPolicy, WirePolicy, parse_policy  # noqa: E402
from bac_server.backends.namespaces.network import (  # noqa: E402
    AddressPool,
    Egress,
    LeaseOwner,
    create_netns,
    delete_veth,
)
from bac_server.backends.namespaces.network._usage import read_usage  # noqa: E402
from bac_server.backends.namespaces.network.nft import (  # noqa: E402
    Contents,
    NftSocket,
    SandboxNames,
    SandboxRules,
)
from bac_server.host import TABLE_NAME, nft, remove_tree  # noqa: E402
from bac_server.host._nftables import ensure_table  # noqa: E402

SINK_PORT = 9000
_SEND = """
import socket, time
data = bytes(1 << 20)
s = socket.create_connection(("{host}", {port}), 10)
t = time.perf_counter()
for _ in range({mbytes}):
    s.sendall(data)
s.shutdown(socket.SHUT_WR)
s.recv(64)
print(time.perf_counter() - t)
"""


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    return (f"p50 {statistics.median(ordered) * 1000:6.2f} ms  "
            f"p90 {ordered[int(len(ordered) * 0.9)] * 1000:6.2f} ms")


async def setup_cost(n: int) -> None:
    leases_dir = private_data_dir() / "bench-leases"
    pool = AddressPool("10.202.0.0/16", Path("/run/bac/addresses"), "bacs")
    egress = Egress(pool, (), ())
    await egress.start()
    netns, attach, detach, veth_del = [], [], [], []
    ahead, attach_after = [], []
    # Each round: one slot's network made on its create's path, then one made as the
    # server's stock makes it (namespace and ``Egress.prepare`` ahead, the attach alone on
    # the create's path).
    for _ in range(n):
        for stocked in (False, True):
            lease = pool.lease(LeaseOwner(str(leases_dir), f"bench-{os.getpid()}"))
            slot = leases_dir / str(lease.index)
            slot.mkdir(parents=True, exist_ok=True)
            try:
                t0 = time.perf_counter()
                fd = await create_netns(lease)
                t1 = time.perf_counter()
                if stocked:
                    await egress.prepare(lease.veth, lease.host_address, lease.sandbox_address)
                    ahead.append(time.perf_counter() - t1)
                    t1 = time.perf_counter()
                await egress.attach(slot, lease.veth, lease.host_address,
                                    lease.sandbox_address, EgressPolicy())
                t2 = time.perf_counter()
                await egress.detach(slot, lease.veth, lease.host_address,
                                    lease.sandbox_address)
                t3 = time.perf_counter()
                await delete_veth(lease.veth)
                t4 = time.perf_counter()
                os.close(fd)
                if stocked:
                    attach_after.append(t2 - t1)
                    continue
                netns.append(t1 - t0)
                attach.append(t2 - t1)
                detach.append(t3 - t2)
                veth_del.append(t4 - t3)
            finally:
                pool.release(lease.index, str(leases_dir))
    await egress.close()
    remove_tree(leases_dir)
    print(f"setup  netns+veth (netlink)      {_ms(netns)}")
    print(f"setup  egress policy + resolver  {_ms(attach)}")
    total = [a + b for a, b in zip(netns, attach, strict=True)]
    print(f"setup  total added to a create   {_ms(total)}")
    print(f"remove egress policy + resolver  {_ms(detach)}")
    print(f"remove veth (netlink)            {_ms(veth_del)}")
    print(f"stock  egress made ahead         {_ms(ahead)}  (off the create's path)")
    print(f"stock  egress policy after it    {_ms(attach_after)}  "
          f"(x{statistics.median(attach_after) / statistics.median(attach):.2f} of the above)")


def _host_send(mbytes: int) -> float:
    data = bytes(1 << 20)
    with socket.create_connection((SITE_A, SINK_PORT), 10) as sock:
        started = time.perf_counter()
        for _ in range(mbytes):
            sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        sock.recv(64)
        return time.perf_counter() - started


async def throughput_and_gateway(template: TemplateImage, mbytes: int, requests: int,
                                 dns: str) -> None:
    data_dir = private_data_dir()
    async with backend_and_factory(template, data_dir=data_dir, pool_size=0,
                                   dns_upstreams=(dns,)) as (_backend, make):
        sbx = await make()
        result = await sbx.python(_SEND.format(host=SITE_A, port=SINK_PORT, mbytes=mbytes))
        nat_s = float(result.stdout.strip().splitlines()[-1])
        named = await make(network=parse_policy(WirePolicy(["allowed.test"], ["0.0.0.0/0"])))
        result = await named.python(_SEND.format(host="allowed.test", port=SINK_PORT,
                                                 mbytes=mbytes))
        relay_s = float(result.stdout.strip().splitlines()[-1])
        raw_s = await asyncio.to_thread(_host_send, mbytes)
        print(f"throughput sandbox -> fake host via NAT  {mbytes / nat_s:8.0f} MB/s")
        print(f"throughput via the host-name relay       {mbytes / relay_s:8.0f} MB/s")
        print(f"throughput host -> fake host, raw veth   {mbytes / raw_s:8.0f} MB/s")
        print(f"ratio NAT / raw                          {raw_s / nat_s:8.2f}")
        print(f"ratio relay / raw                        {raw_s / relay_s:8.2f}")
    remove_tree(data_dir)
    await asyncio.to_thread(gateway_latency, requests, dns)


def gateway_latency(requests: int, dns: str) -> None:
    import httpx
    from bac_process import running
    from e2b import Sandbox

    # One write per response: a header/body split would meet delayed ACKs (40 ms).
    serve = ("import http.server as h\n"
             "class H(h.BaseHTTPRequestHandler):\n"
             "    protocol_version = 'HTTP/1.1'\n"
             "    def do_GET(self):\n"
             "        self.wfile.write(b'HTTP/1.1 200 OK\\r\\nContent-Length: 100\\r\\n\\r\\n'"
             " + b'x' * 100)\n"
             "    def log_message(self, *args):\n"
             "        pass\n"
             "h.ThreadingHTTPServer(('0.0.0.0', 8000), H).serve_forever()\n")
    with running("bench-network", BAC_DNS_UPSTREAMS=dns, BAC_POOL_SIZE="1") as server:
        key = server.create_key("bench")
        sbx = Sandbox.create(api_key=key, api_url=server.url, sandbox_url=server.url)
        try:
            sbx.files.write("/tmp/serve.py", serve)
            sbx.commands.run("cd /home/user && python3 /tmp/serve.py", background=True)
            sbx.commands.run("for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8000) "
                             "2>/dev/null && break; sleep 0.1; done")
            address = sbx.commands.run("hostname -I").stdout.split()[0]
            route = {"E2b-Sandbox-Id": sbx.sandbox_id, "E2b-Sandbox-Port": "8000"}
            timings = {}
            for label, url, headers in (("direct ", f"http://{address}:8000", {}),
                                        ("gateway", server.url, route)):
                with httpx.Client(base_url=url, headers=headers, trust_env=False) as client:
                    for _ in range(50):  # warm up connections and caches
                        client.get("/index.html")
                    samples = []
                    for _ in range(requests):
                        started = time.perf_counter()
                        assert client.get("/index.html").status_code == 200
                        samples.append(time.perf_counter() - started)
                timings[label] = samples
                print(f"http {label} {_ms(samples)}")
            added = statistics.median(timings["gateway"]) - statistics.median(timings["direct "])
            print(f"gateway overhead p50 {added * 1000:.2f} ms per request")
        finally:
            sbx.kill()


_SCALE_PREFIX = "bacs"
_CLONE_NEWNET = 0x40000000
# An allow-list (domains with and without ports, CIDRs, a CIDR on a port, a resolver of
# its own) and a deny-list; the sandboxes in the table have each, and a third of them a
# CIDR on a port too large to list point by point (a box: see _nftables.KeyShape).
_SCALE_POLICIES = (
    parse_policy(WirePolicy(["allowed.test", "*.wild.test:443", "api.test:8000-8010",
                             "203.0.113.0/24", "198.51.100.7:80"],
                            ["0.0.0.0/0"], ["192.0.2.53"], None)),
    parse_policy(WirePolicy(None, ["198.51.100.0/24", "203.0.113.9:22"], None, None)),
    parse_policy(WirePolicy(["api.test", "198.51.100.0/24:443"], ["0.0.0.0/0"], None, None)),
)


def _percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _scale_names(index: int) -> SandboxNames:
    host = ipaddress.IPv4Address("10.202.0.0") + 2 * index
    return SandboxNames(f"{_SCALE_PREFIX}{index}", str(host), str(host + 1))


class _KernelTimedSocket(NftSocket):
    """Also keeps how long the kernel took over each batch (send to last answer), apart
    from the Python that encoded it."""

    def __init__(self) -> None:
        super().__init__()
        self.kernel_s = 0.0

    def _exchange(self, batch: bytes, begin: int, last: int) -> int:
        started = time.perf_counter()
        try:
            return super()._exchange(batch, begin, last)
        finally:
            self.kernel_s += time.perf_counter() - started


def _timed(samples: dict[str, list[float]], socket: _KernelTimedSocket, what: str,
           call: Callable[[], object]) -> None:
    socket.kernel_s = 0.0
    started = time.perf_counter()
    call()
    samples.setdefault(what, []).append(time.perf_counter() - started)
    if socket.kernel_s:
        samples.setdefault(f"{what}: kernel", []).append(socket.kernel_s)


def _scale_round(socket: _KernelTimedSocket, index: int,
                 samples: dict[str, list[float]]) -> None:
    """One sandbox's whole egress life, each step timed."""
    names = _scale_names(index)
    rules = SandboxRules(socket, TABLE_NAME, names, [], Contents())
    steps: list[tuple[str, Callable[[], object]]] = [
        ("install", lambda: rules.install(_SCALE_POLICIES[0])),
        ("pin", lambda: rules.pin("a.wild.test", ["93.184.216.34"], 300)),
        ("update", lambda: rules.update(_SCALE_POLICIES[1])),
        ("update back", lambda: rules.update(_SCALE_POLICIES[0])),
        ("update adding a box", lambda: rules.update(_SCALE_POLICIES[2])),
        ("update dropping it", lambda: rules.update(_SCALE_POLICIES[0])),
        ("usage read", lambda: read_usage(socket, TABLE_NAME, names, [])),
        ("remove", rules.remove),
        ("libnftables (ref)",
         lambda: nft(f'add element inet {TABLE_NAME} open {{ "{names.veth}" }}\n'
                     f'delete element inet {TABLE_NAME} open {{ "{names.veth}" }}\n'))]
    for what, call in steps:
        _timed(samples, socket, what, call)


def scale_cost(rounds: int, counts: list[int]) -> None:
    """Per-sandbox egress changes with ``counts`` other sandboxes in the table."""
    # A network namespace of its own (this thread's; everything below runs on it).
    if ctypes.CDLL(None, use_errno=True).unshare(_CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) failed")
    ensure_table(_SCALE_PREFIX)
    socket = _KernelTimedSocket()
    results: dict[int, dict[str, list[float]]] = {}
    present = 0
    for count in sorted(counts):
        while present < count:  # the others: each policy in turn
            SandboxRules(socket, TABLE_NAME, _scale_names(present), [],
                         Contents()).install(_SCALE_POLICIES[present % 3])
            present += 1
        samples: dict[str, list[float]] = {}
        for round_ in range(rounds + 10):
            _scale_round(socket, 20_000 + round_, samples if round_ >= 10 else {})
        results[count] = samples
    socket.close()
    low, high = min(counts), max(counts)
    print(f"egress changes of one sandbox, {rounds} rounds (ms; kernel: send to answer)")
    print(f"{'':22} " + "".join(f"{f'{c} p50':>10} {f'{c} p99':>10} " for c in sorted(counts))
          + f"{f'ratio {high}/{low}':>14}")
    for what in results[low]:
        cells = ""
        for count in sorted(counts):
            p50, p99 = _percentiles(results[count][what])
            cells += f"{p50 * 1000:10.3f} {p99 * 1000:10.3f} "
        ratio = _percentiles(results[high][what])[0] / _percentiles(results[low][what])[0]
        print(f"{what:22} {cells}{ratio:14.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=30, help="sandbox network set-ups to time")
    parser.add_argument("--mbytes", type=int, default=256, help="MiB sent per direction")
    parser.add_argument("--requests", type=int, default=500, help="HTTP requests per path")
    parser.add_argument("--scale", action="store_true",
                        help="only time one sandbox's egress changes among many")
    parser.add_argument("--rounds", type=int, default=200, help="--scale: rounds per size")
    parser.add_argument("--sandboxes", default="10,1000",
                        help="--scale: how many other sandboxes, comma-separated")
    args = parser.parse_args()
    if args.scale:
        scale_cost(args.rounds, [int(c) for c in args.sandboxes.split(",")])
        return
    with fake_internet() as net:
        asyncio.run(setup_cost(args.n))
        template = base_template()
        asyncio.run(throughput_and_gateway(template, args.mbytes, args.requests,
                                           net.dns_server))


if __name__ == "__main__":
    main()
