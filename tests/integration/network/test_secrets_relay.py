"""E2B secrets that never enter the sandbox, through a real server, the official SDK and the
fake internet (network namespaces): the egress relay terminates TLS for a ruled host with
the sandbox's own CA, puts the secret in, and verifies the site against the operator's
CA. The site sees the value; the sandbox (its env, its files, every process's memory),
a checkpoint, the store and the log never do; other hosts keep the placeholder, and the
ways around the scope (another Host inside the TLS, another address for the ruled name)
are refused with nothing sent."""

from __future__ import annotations

import os
import re
import shlex
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from e2b import Sandbox, Secret
from fake_internet import SITE_B, FakeInternet, requests_seen

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat"))

from bac_process import ServerProcess, running

pytestmark = [pytest.mark.root]
# Two requests over one kept-alive HTTPS connection, the second once stdin says so.
KEEP_ALIVE = """
import http.client, sys
conn = http.client.HTTPSConnection("allowed.test", timeout=20)
conn.request("GET", "/kept-1-{tag}"); conn.getresponse().read()
print("one", flush=True)
sys.stdin.readline()
conn.request("GET", "/kept-2-{tag}"); conn.getresponse().read()
"""


@pytest.fixture(scope="module")
def server(internet: FakeInternet, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[ServerProcess]:
    ca = tmp_path_factory.mktemp("secrets-ca") / "ca.pem"
    ca.write_bytes(internet.ca_pem)
    with running("secrets", BAC_DNS_UPSTREAMS=internet.dns_server, BAC_POOL_SIZE="1",
                 BAC_SANDBOX_CA_CERTS=str(ca)) as srv:
        srv.create_key("secrets")
        saved = {k: os.environ.get(k) for k in ("E2B_API_URL", "E2B_SANDBOX_URL", "E2B_API_KEY")}
        os.environ.update(E2B_API_URL=srv.url, E2B_SANDBOX_URL=srv.url, E2B_API_KEY=srv.keys[0])
        yield srv
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)


def _headers_of(path: str) -> list[dict[str, str]]:
    """The headers of every request the fake site got for ``path``."""
    found = []
    for seen in requests_seen():
        if seen["path"] == path:
            pairs = seen["headers"]
            assert isinstance(pairs, list)
            found.append({str(k).lower(): str(v) for k, v in pairs})
    return found


def _sandbox_pids(server: ServerProcess, sandbox_id: str) -> set[int]:
    slot = (server.data_dir / "claims" / sandbox_id).read_text()
    pids: set[int] = set()
    for root in Path("/sys/fs/cgroup").iterdir():
        procs = root / "bac" / slot / "cgroup.procs"
        if procs.is_file():
            pids.update(int(x) for x in procs.read_text().split())
    return pids


def _in_memory(pid: int, needle: bytes) -> bool:
    """Whether ``needle`` is anywhere in the process's readable memory (read from the
    host through /proc/<pid>/mem)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
        mem = open(f"/proc/{pid}/mem", "rb", buffering=0)
    except OSError:
        return False  # gone meanwhile
    with mem:
        for line in maps.splitlines():
            span, perms = line.split()[:2]
            if not perms.startswith("r"):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(start)
                if needle in mem.read(end - start):
                    return True
            except (OSError, OverflowError, ValueError):
                continue  # vsyscall and the like
    return False


def _files_holding(root: Path, needle: bytes, skip: tuple[str, ...] = ()) -> list[str]:
    """Files under ``root`` (not in its top-level entries ``skip``) holding ``needle``."""
    found = []
    for path in root.rglob("*"):
        if path.relative_to(root).parts[0] in skip:
            continue
        try:
            if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                found.append(str(path))
        except OSError:
            continue
    return found


def _curl(sbx: Sandbox, args: str) -> tuple[int, str]:
    result = sbx.commands.run(f"curl -sS -m 10 {args} 2>&1; echo \" exit=$?\"")
    exit_code = int(re.findall(r"exit=(\d+)", result.stdout)[-1])
    return exit_code, result.stdout


def test_secret_reaches_the_ruled_host_and_nothing_else(server: ServerProcess) -> None:
    """The ruled HTTPS request arrives with the real value (rule header and a placeholder
    the sandbox wrote), another host gets the placeholder verbatim, and the value is in
    no env var, file, process memory, checkpoint, store file or log."""
    name = f"api-key-{uuid.uuid4().hex[:6]}"
    value = "sk-live-" + uuid.uuid4().hex
    Secret.create(name, value)
    placeholder = Secret.fill(name)
    sbx = Sandbox.create(timeout=120, network={
        "allow_out": ["allowed.test", "other.test"], "deny_out": ["0.0.0.0/0"],
        "rules": {"allowed.test": [
            {"transform": {"headers": {"Authorization": f"Bearer {placeholder}"}}}]}})
    try:
        tag = uuid.uuid4().hex[:8]
        code, out = _curl(sbx, f"https://allowed.test/ruled-{tag} "
                               f"-H 'X-Own: {placeholder}' -H 'Authorization: Bearer mine'")
        assert code == 0, out
        (seen,) = _headers_of(f"/ruled-{tag}")
        assert seen["authorization"] == f"Bearer {value}"  # the rule's, replacing the own
        assert seen["x-own"] == value  # a placeholder the sandbox wrote, in scope
        code, out = _curl(sbx, f"https://other.test/other-{tag} "
                               f"-H 'Authorization: Bearer {placeholder}'")
        assert code == 0, out
        (other,) = _headers_of(f"/other-{tag}")
        assert other["authorization"] == f"Bearer {placeholder}"

        # The sandbox sees the placeholder only: env, files, every process's memory.
        sbx.commands.run("sleep 30", background=True, envs={"TOKEN": placeholder})
        env = sbx.commands.run("env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'",
                               user="root")
        assert value not in env.stdout
        needle = value.encode()
        pids = _sandbox_pids(server, sbx.sandbox_id)
        assert pids
        assert [p for p in pids if _in_memory(p, needle)] == []
        # The search does see the sandbox: the placeholder is in its memory and files.
        assert any(_in_memory(p, placeholder.encode()) for p in pids)
        sbx.files.write("/home/user/note.txt", placeholder)
        slot = (server.data_dir / "claims" / sbx.sandbox_id).read_text()
        # The slot's files: Bac's own, and the sandbox's through its mounted disk
        # (``layer/upper``); not the overlay of the template's layers, nor the raw image.
        skip = ("rootfs", "disk.img", "netns")
        assert _files_holding(server.data_dir / "sandboxes" / slot, needle, skip) == []
        assert _files_holding(server.data_dir / "sandboxes" / slot, placeholder.encode(),
                              skip)

        headers = {"X-API-KEY": server.keys[0]}
        taken = httpx.post(f"{server.url}/sandboxes/{sbx.sandbox_id}/checkpoints",
                           json={"memory": True}, headers=headers, timeout=120)
        assert taken.status_code == 201, taken.text
        cid = taken.json()["checkpointID"]
        checkpoint = server.data_dir / "checkpoints" / cid
        assert checkpoint.is_dir()
        assert _files_holding(checkpoint, needle) == []
        assert _files_holding(checkpoint, placeholder.encode())  # its memory is there
        # Every read of the sandbox the API gives: its record, trace, network log.
        for route in ("", "/trace", "/network", "/logs"):
            answer = httpx.get(f"{server.url}/sandboxes/{sbx.sandbox_id}{route}",
                               headers=headers, timeout=30)
            assert answer.status_code == 200 and value not in answer.text, route
    finally:
        sbx.kill()
        Secret.destroy(name)
    for path in [server.log, *server.data_dir.glob("bac.db*")]:
        assert needle not in path.read_bytes(), path


def test_ways_around_the_scope_are_refused(server: ServerProcess) -> None:
    """Inside a ruled TLS connection another Host is refused (421); the ruled name asked of
    another site's address (its own server) is refused, over TLS and plain HTTP; a rule
    naming a secret that does not exist answers 502 naming it; none of these requests
    reaches a site."""
    name = f"scoped-{uuid.uuid4().hex[:6]}"
    value = "scoped-" + uuid.uuid4().hex
    Secret.create(name, value)
    sbx = Sandbox.create(timeout=120, network={
        "allow_out": ["allowed.test", "other.test"], "deny_out": ["0.0.0.0/0"],
        "rules": {"allowed.test": [{"transform": {"headers": {
            "X-Key": Secret.fill(name), "X-Gone": Secret.fill(name + "-missing")}}}]}})
    try:
        tag = uuid.uuid4().hex[:8]
        sbx.commands.run("getent hosts allowed.test other.test")  # resolved, as a client would
        out = _curl(sbx, f"-w '%{{http_code}}' https://allowed.test/host-{tag} "
                         "-H 'Host: other.test'")[1]
        assert "opened for allowed.test, not other.test" in out and "421" in out, out
        unresolved = f"{SITE_B} was not resolved for allowed.test"
        out = _curl(sbx, f"--resolve allowed.test:443:{SITE_B} "
                         f"https://allowed.test/address-{tag}")[1]
        assert unresolved in out, out
        out = _curl(sbx, f"http://{SITE_B}/plain-{tag} -H 'Host: allowed.test'")[1]
        assert unresolved in out, out
        out = _curl(sbx, f"-w '%{{http_code}}' https://allowed.test/missing-{tag}")[1]
        assert "502" in out and f"{name}-missing" in out, out
        assert value not in out
        for path in ("host", "address", "plain", "missing"):
            assert _headers_of(f"/{path}-{tag}") == [], path
    finally:
        sbx.kill()
        Secret.destroy(name)


def test_rules_are_checked_and_replaced_by_update(server: ServerProcess) -> None:
    """A rule for a host allowOut does not allow, or for an address, is a 400; a PUT
    with rules applies them to the next request, one without clears them, also on a
    connection opened while they applied."""
    from e2b.exceptions import InvalidArgumentException, SandboxException

    bad = [{"allow_out": ["allowed.test"], "deny_out": ["0.0.0.0/0"],
            "rules": {"other.test": [{"transform": {"headers": {"X": "y"}}}]}},
           {"allow_out": ["1.2.3.4"], "deny_out": ["0.0.0.0/0"],
            "rules": {"1.2.3.4": [{"transform": {"headers": {"X": "y"}}}]}}]
    for network in bad:
        with pytest.raises((InvalidArgumentException, SandboxException), match="rules"):
            Sandbox.create(timeout=30, network=network)  # type: ignore[arg-type]
    name = f"upd-{uuid.uuid4().hex[:6]}"
    value = "upd-" + uuid.uuid4().hex
    Secret.create(name, value)
    sbx = Sandbox.create(timeout=120, network={"allow_out": ["allowed.test"],
                                               "deny_out": ["0.0.0.0/0"]})
    try:
        tag = uuid.uuid4().hex[:8]
        sbx.update_network({"allow_out": ["allowed.test"], "deny_out": ["0.0.0.0/0"],
                            "rules": {"allowed.test": [{"transform": {"headers": {
                                "X-Key": Secret.fill(name)}}}]}})
        assert _curl(sbx, f"https://allowed.test/on-{tag}")[0] == 0
        assert _headers_of(f"/on-{tag}")[0]["x-key"] == value
        info = sbx.get_info().network  # the SDK reads the rules back: placeholders only
        assert info is not None and info["rules"] == {"allowed.test": [
            {"transform": {"headers": {"X-Key": Secret.fill(name)}}}]}
        # A connection opened under the rule: its next request follows the update.
        keep = sbx.commands.run(f"python3 -c {shlex.quote(KEEP_ALIVE.format(tag=tag))}",
                                background=True, stdin=True, timeout=60)
        events = iter(keep)
        assert any(out and "one" in out for out, _err, _pty in events)
        sbx.update_network({"allow_out": ["allowed.test"], "deny_out": ["0.0.0.0/0"]})
        sbx.commands.send_stdin(keep.pid, "go\n")
        for _event in events:  # to its end
            pass
        first, second = _headers_of(f"/kept-1-{tag}"), _headers_of(f"/kept-2-{tag}")
        assert first[0]["x-key"] == value and "x-key" not in second[0]
        assert _curl(sbx, f"https://allowed.test/off-{tag}")[0] == 0
        assert "x-key" not in _headers_of(f"/off-{tag}")[0]
    finally:
        sbx.kill()
        Secret.destroy(name)


def test_a_restarted_server_keeps_relaying_for_a_running_sandbox(server: ServerProcess
                                                                 ) -> None:
    """The relay CA outlives the server process, sealed in the slot (never in clear):
    after a restart the sandbox's ruled HTTPS still gets its secret, and after a pause
    and resume too."""
    name = f"restart-{uuid.uuid4().hex[:6]}"
    value = "restart-" + uuid.uuid4().hex
    Secret.create(name, value)
    sbx = Sandbox.create(timeout=120, network={
        "allow_out": ["allowed.test"], "deny_out": ["0.0.0.0/0"],
        "rules": {"allowed.test": [{"transform": {"headers": {"X-Key": Secret.fill(name)}}}]}})
    try:
        tag = uuid.uuid4().hex[:8]
        assert _curl(sbx, f"https://allowed.test/before-{tag}")[0] == 0
        slot = (server.data_dir / "claims" / sbx.sandbox_id).read_text()
        sealed = server.data_dir / "sandboxes" / slot / "relay-ca.sealed"
        assert b"PRIVATE KEY" not in sealed.read_bytes()
        server.stop()
        server.start()
        assert _curl(sbx, f"https://allowed.test/after-{tag}")[0] == 0
        assert _headers_of(f"/after-{tag}")[0]["x-key"] == value
        sbx.pause()  # to disk, then back: the CA is the one it trusted
        sbx.connect()
        assert _curl(sbx, f"https://allowed.test/resumed-{tag}")[0] == 0
        assert _headers_of(f"/resumed-{tag}")[0]["x-key"] == value
    finally:
        sbx.kill()
        Secret.destroy(name)


def test_a_fork_keeps_the_rules_with_a_relay_ca_of_its_own(server: ServerProcess) -> None:
    """A fork (restored from a snapshot of the ruled sandbox) relays its ruled HTTPS with
    the secret too: its /init brings a CA of its own, which its trust store takes."""
    name = f"fork-{uuid.uuid4().hex[:6]}"
    value = "fork-" + uuid.uuid4().hex
    Secret.create(name, value)
    sbx = Sandbox.create(timeout=120, network={
        "allow_out": ["allowed.test"], "deny_out": ["0.0.0.0/0"],
        "rules": {"allowed.test": [{"transform": {"headers": {"X-Key": Secret.fill(name)}}}]}})
    forks: list[object] = []
    try:
        forks = list(sbx.fork(timeout=60))
        (fork,) = forks
        assert isinstance(fork, Sandbox), fork
        tag = uuid.uuid4().hex[:8]
        assert _curl(fork, f"https://allowed.test/fork-{tag}")[0] == 0
        assert _headers_of(f"/fork-{tag}")[0]["x-key"] == value
        relay_ca = "/usr/local/share/ca-certificates/bac/relay-0.crt"
        assert fork.files.read(relay_ca) != sbx.files.read(relay_ca)  # a CA of its own
    finally:
        for fork in forks:
            if isinstance(fork, Sandbox):
                fork.kill()
        sbx.kill()
        Secret.destroy(name)
