"""The trace of a sandbox driven by the official e2b SDK: what envd reports from inside
(each process, each file transfer) and the lifecycle, read through ``GET
/sandboxes/{id}/trace`` (paged, followed live, by run) and through the official CLI's
``e2b sandbox logs``.

Waiting is on the follow stream itself (an NDJSON line arriving, bounded by the read
timeout), never on a sleep.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from bac_process import ServerProcess
from e2b import CommandExitException, NotFoundException, Sandbox, TimeoutException

Event = dict[str, Any]
JS_DIR = Path(__file__).parent / "js"
BOUND_S = 20.0


@pytest.fixture
def api(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers={"X-API-KEY": server.keys[0]},
                      timeout=BOUND_S) as client:
        yield client


def _last_id(api: httpx.Client, sandbox_id: str) -> int:
    page = api.get(f"/sandboxes/{sandbox_id}/trace", params={"limit": 1000}).json()
    return max((e["id"] for e in page["events"]), default=0)


def wait_event(api: httpx.Client, sandbox_id: str, match: Callable[[Event], bool], *,
               after: int = 0) -> Event:
    """The first event after ``after`` that ``match`` accepts, read from the live stream."""
    params = {"follow": "true", "after": str(after)}
    with api.stream("GET", f"/sandboxes/{sandbox_id}/trace", params=params) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("application/x-ndjson")
        for line in response.iter_lines():
            if line and match(event := json.loads(line)):
                return event
    raise AssertionError("the stream ended without the event")


def process_event(api: httpx.Client, sbx: Sandbox, marker: str, after: int) -> Event:
    return wait_event(api, sbx.sandbox_id, lambda e: e["kind"] == "process"
                      and marker in e["fields"]["cmd"], after=after)


def test_process_events_say_how_each_command_ended(api: httpx.Client) -> None:
    with Sandbox.create(timeout=120) as sbx:
        start = _last_id(api, sbx.sandbox_id)
        with pytest.raises(CommandExitException):
            sbx.commands.run("echo out; printf 'e!' >&2; exit 3 # m-exit")
        ended = process_event(api, sbx, "m-exit", start)
        fields = ended["fields"]
        assert fields["exit_code"] == 3 and "signal" not in fields
        assert fields["stdout_bytes"] == 4 and fields["stderr_bytes"] == 2
        assert fields["stdout_tail"] == "out\n" and fields["stderr_tail"] == "e!"
        assert fields["user"] == "user" and fields["cwd"] == "/home/user"
        assert fields["timed_out"] is False and fields["client_left"] is False
        assert fields["duration_ms"] >= 0 and ended["level"] == "warn"

        with pytest.raises(CommandExitException):
            sbx.commands.run("kill -TERM $$ # m-signal")
        assert process_event(api, sbx, "m-signal", start)["fields"]["signal"] == 15

        with pytest.raises(TimeoutException):
            sbx.commands.run("sleep 30 # m-timeout", timeout=1)
        timed = process_event(api, sbx, "m-timeout", start)["fields"]
        assert timed["timed_out"] is True and timed["signal"] == 9

        root = sbx.commands.run("pwd # m-root", user="root", cwd="/tmp")
        assert root.exit_code == 0
        as_root = process_event(api, sbx, "m-root", start)["fields"]
        assert as_root["user"] == "root" and as_root["cwd"] == "/tmp"
        assert as_root["stdout_bytes"] == len("/tmp\n")
        assert "stderr_tail" not in as_root  # nothing written there

        # A long output keeps its end (512 bytes), whole characters only.
        sbx.commands.run("for i in $(seq 1 400); do echo \"l$i é\"; done # m-long")
        long = process_event(api, sbx, "m-long", start)["fields"]
        tail = long["stdout_tail"]
        assert tail.endswith("l400 é\n") and len(tail.encode()) <= 512
        assert "\ufffd" not in tail and "l1 é" not in tail


def test_a_disconnected_client_is_recorded(api: httpx.Client) -> None:
    with Sandbox.create(timeout=120) as sbx:
        start = _last_id(api, sbx.sandbox_id)
        # It waits for a file that appears only after the client has gone.
        handle = sbx.commands.run("while [ ! -e /tmp/go ]; do sleep 0.05; done # m-left",
                                  background=True)
        handle.disconnect()
        sbx.files.write("/tmp/go", "")
        fields = process_event(api, sbx, "m-left", start)["fields"]
        assert fields["client_left"] is True and fields["exit_code"] == 0


def test_file_transfers_in_both_directions(api: httpx.Client) -> None:
    with Sandbox.create(timeout=120) as sbx:
        start = _last_id(api, sbx.sandbox_id)
        body = os.urandom(300_000)
        sbx.files.write("/home/user/blob.bin", body)
        assert sbx.files.read("/home/user/blob.bin", format="bytes") == bytes(body)

        def transfer(direction: str) -> Callable[[Event], bool]:
            return lambda e: e["kind"] == "transfer" and e["fields"]["direction"] == direction

        up = wait_event(api, sbx.sandbox_id, transfer("upload"), after=start)["fields"]
        down = wait_event(api, sbx.sandbox_id, transfer("download"), after=start)["fields"]
        for seen in (up, down):
            assert seen["path"] == "/home/user/blob.bin"
            assert seen["bytes"] == len(body)
            assert seen["ok"] is True and seen["status"] == 200
        with pytest.raises(NotFoundException):
            sbx.files.read("/home/user/missing.bin")
        failed = wait_event(api, sbx.sandbox_id, lambda e: e["kind"] == "transfer"
                            and e["fields"]["status"] == 404, after=start)
        assert failed["fields"]["ok"] is False and failed["fields"]["bytes"] == 0


_FORGE = r"""
import json, socket, sys
forged = {"kind": "process", "pid": 1, "cmd": "forged-by-root %s", "user": "root",
          "cwd": "/", "duration_ms": 1, "exit_code": 0, "sandbox_id": sys.argv[1]}
payloads = [b"\xff\xfe not json", b"[1,2]", json.dumps({"kind": "nope"}).encode(),
            json.dumps({"kind": "process", "pid": "x", "cmd": 5}).encode(),
            b"{" * 60000, json.dumps(forged).encode()]
for payload in payloads:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.sendto(payload, "/run/bac/trace.sock")
    except OSError as exc:
        print("refused", exc.errno, len(payload))
    finally:
        s.close()
print("sent")
"""


def test_garbage_and_forged_reports_from_root_stay_in_their_sandbox(
        api: httpx.Client) -> None:
    with Sandbox.create(timeout=120) as victim, Sandbox.create(timeout=120) as attacker:
        start = _last_id(api, attacker.sandbox_id)
        script = _FORGE.replace("%s", "m-forged")
        attacker.files.write("/tmp/forge.py", script)
        done = attacker.commands.run(f"python3 /tmp/forge.py {victim.sandbox_id}",
                                     user="root")
        assert "sent" in done.stdout
        forged = wait_event(api, attacker.sandbox_id, lambda e: e["kind"] == "process"
                            and "m-forged" in e["fields"]["cmd"], after=start)
        assert forged["sandboxID"] == attacker.sandbox_id
        assert "sandbox_id" not in forged["fields"]  # unknown fields are dropped
        # The server took every datagram and kept serving: the sandbox still runs commands,
        # and its next report arrives.
        assert attacker.commands.run("echo alive # m-after").stdout == "alive\n"
        process_event(api, attacker, "m-after", start)
        victims = api.get(f"/sandboxes/{victim.sandbox_id}/trace",
                          params={"kind": "process"}).json()["events"]
        assert not [e for e in victims if "forged" in e["fields"]["cmd"]]
        trace = api.get(f"/sandboxes/{attacker.sandbox_id}/trace",
                        params={"kind": "process", "after": start}).json()["events"]
        # Only the well-formed report (and the real commands) made it.
        assert [e["fields"]["cmd"] for e in trace if "forged" in e["fields"]["cmd"]] == \
            ["forged-by-root m-forged"]


def test_the_sandbox_user_cannot_send_reports(api: httpx.Client) -> None:
    with Sandbox.create(timeout=120) as sbx:
        probe = ("import socket; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
                 "try:\n s.sendto(b'{}', '/run/bac/trace.sock'); print('sent')\n"
                 "except OSError as e:\n print('refused', e.errno)\n")
        sbx.files.write("/tmp/probe.py", probe)
        out = sbx.commands.run("python3 /tmp/probe.py").stdout
        assert out.startswith("refused"), out


def test_follow_streams_an_event_written_after_it_started(
        api: httpx.Client, server: ServerProcess) -> None:
    with Sandbox.create(timeout=120) as sbx:
        start = _last_id(api, sbx.sandbox_id)
        params = {"follow": "true", "after": str(start)}
        with api.stream("GET", f"/sandboxes/{sbx.sandbox_id}/trace",
                        params=params) as response:
            assert response.status_code == 200
            lines = response.iter_lines()
            # The stream is open (its headers arrived) before the command runs.
            sbx.commands.run("true # m-follow")
            for line in lines:
                event = json.loads(line)
                if event["kind"] == "process" and "m-follow" in event["fields"]["cmd"]:
                    break
            sbx.kill()
            # Then the stream ends by itself, after the end's event.
            rest = [json.loads(line) for line in lines if line]
        assert rest and rest[-1]["kind"] == "killed"


def test_trace_filters_pages_and_outlives_the_sandbox(api: httpx.Client,
                                                      server: ServerProcess) -> None:
    sbx = Sandbox.create(timeout=120)
    try:
        for n in range(3):
            sbx.commands.run(f"true # m-page-{n}")
        wait_event(api, sbx.sandbox_id, lambda e: "m-page-2" in e.get("message", ""))
    finally:
        sbx.kill()
    url = f"/sandboxes/{sbx.sandbox_id}/trace"
    first = api.get(url, params={"kind": "process", "limit": 2}).json()
    assert [e["kind"] for e in first["events"]] == ["process", "process"]
    assert first["nextCursor"] is not None
    second = api.get(url, params={"kind": "process", "after": first["nextCursor"]}).json()
    assert [e["kind"] for e in second["events"]] == ["process"]
    assert second["nextCursor"] is None
    kinds = [e["kind"] for e in api.get(url).json()["events"]]
    assert kinds[0] == "created" and kinds[-1] == "killed"
    # An ended sandbox's follow gives what it has and ends.
    with api.stream("GET", url, params={"follow": "true"}) as response:
        assert [json.loads(x)["kind"] for x in response.iter_lines() if x] == kinds
    # Another team's key sees no such sandbox, live or ended.
    other = httpx.get(f"{api.base_url}{url}", headers={"X-API-KEY": server.keys[1]})
    assert other.status_code == 404
    bad = api.get(url, params={"kind": "nonsense"})
    assert bad.status_code == 400 and "nonsense" in bad.json()["message"]
    assert api.get("/sandboxes/nosuchsandbox/trace").status_code == 404


def test_a_run_reads_as_one_trace(api: httpx.Client) -> None:
    run = os.urandom(4).hex()
    with Sandbox.create(timeout=120, metadata={"run_id": run, "step": "a"}) as a, \
            Sandbox.create(timeout=120, metadata={"run_id": run, "step": "b"}) as b, \
            Sandbox.create(timeout=120, metadata={"run_id": "other"}) as other:
        for sbx in (a, b, other):
            sbx.commands.run("true # m-run")
        for sbx in (a, b):
            process_event(api, sbx, "m-run", 0)
        events = api.get("/trace", params={"metadata": f"run_id:{run}"}).json()["events"]
        assert {e["sandboxID"] for e in events} == {a.sandbox_id, b.sandbox_id}
        assert all(e["metadata"]["run_id"] == run for e in events)
        assert {e["kind"] for e in events} >= {"created", "process"}
        only_b = api.get("/trace", params={"metadata": f"run_id:{run},step:b",
                                           "kind": "process"}).json()["events"]
        assert {e["sandboxID"] for e in only_b} == {b.sandbox_id}
        assert api.get("/trace").status_code == 400
        assert api.get("/trace", params={"metadata": "novalue"}).status_code == 400
        odd = api.get("/trace", params={"metadata": 'a"b:1'})
        assert odd.status_code == 400 and "cannot name a run" in odd.json()["message"]


def test_official_cli_sandbox_logs(server: ServerProcess, api: httpx.Client) -> None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm are not installed")
    cli_bin = JS_DIR / "node_modules" / ".bin" / "e2b"
    if not cli_bin.exists():  # node_modules from before the CLI was pinned: install it
        done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=JS_DIR,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
    with Sandbox.create(timeout=120) as sbx:
        sbx.commands.run("true # m-cli")
        process_event(api, sbx, "m-cli", 0)
        env = {k: v for k, v in os.environ.items() if not k.startswith("E2B_")}
        env |= {"E2B_API_URL": server.url, "E2B_API_KEY": server.keys[0],
                "E2B_DOMAIN": "localhost", "NO_UPDATE_NOTIFIER": "1", "HOME": str(JS_DIR)}
        cli = [str(cli_bin), "sandbox", "logs",
               sbx.sandbox_id]
        for extra in ([], ["--format", "json"]):
            done = subprocess.run([*cli, *extra], env=env, capture_output=True, text=True,
                                  timeout=60, check=False)
            assert done.returncode == 0, done.stderr + done.stdout
            assert "m-cli" in done.stdout and "created from template" in done.stdout
        lines = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
        assert {x["level"] for x in lines} <= {"info", "warn", "error", "debug"}
        assert any(x.get("logger") == "process" for x in lines)


def test_reports_survive_pause_resume_and_a_fork_reports_as_itself(
        api: httpx.Client) -> None:
    with Sandbox.create(timeout=120) as sbx:
        start = _last_id(api, sbx.sandbox_id)
        assert sbx.pause() is True
        sbx.connect()
        sbx.commands.run("true # m-resumed")
        process_event(api, sbx, "m-resumed", start)
        paused = api.get(f"/sandboxes/{sbx.sandbox_id}/trace",
                         params={"kind": "paused,resumed", "after": start}).json()["events"]
        assert [e["kind"] for e in paused] == ["paused", "resumed"]

        forked = api.post(f"/sandboxes/{sbx.sandbox_id}/fork", json={"count": 1,
                                                                     "timeout": 60})
        assert forked.status_code in (200, 201), forked.text
        fork_id = forked.json()[0]["sandbox"]["sandboxID"]
        try:
            fork = Sandbox.connect(fork_id)
            fork.commands.run("true # m-fork")
            seen = process_event(api, fork, "m-fork", 0)
            assert seen["sandboxID"] == fork_id
            source = api.get(f"/sandboxes/{sbx.sandbox_id}/trace",
                             params={"kind": "process"}).json()["events"]
            assert not [e for e in source if "m-fork" in e["fields"]["cmd"]]
        finally:
            api.delete(f"/sandboxes/{fork_id}")


def test_lifecycle_events_say_how_and_why(api: httpx.Client) -> None:
    sbx = Sandbox.create(timeout=120)
    try:
        events = api.get(f"/sandboxes/{sbx.sandbox_id}/trace").json()["events"]
        created, started = events[0], events[1]
        assert created["kind"] == "created" and created["fields"]["template"] == "base"
        assert started["kind"] == "started"
        how = started["fields"]["how"]
        assert how in ("pool", "start_snapshot", "boot")
        part = {"pool": "handout_ms", "start_snapshot": "restore_ms", "boot": "boot_ms"}[how]
        assert float(started["fields"][part]) > 0
        assert float(started["fields"]["total_ms"]) >= float(started["fields"][part])
        start = _last_id(api, sbx.sandbox_id)
        sbx.set_timeout(60)
        sbx.set_timeout(90)
        shorter, longer = api.get(f"/sandboxes/{sbx.sandbox_id}/trace", params={
            "kind": "timeout_set", "after": start}).json()["events"]
        assert shorter["fields"]["change"] == "shortened"
        assert longer["fields"]["change"] == "extended"
        assert longer["fields"]["previous_end_at"] == shorter["fields"]["end_at"]
        start = _last_id(api, sbx.sandbox_id)
        assert sbx.pause() is True
        sbx.connect()
        paused, resumed = api.get(f"/sandboxes/{sbx.sandbox_id}/trace", params={
            "kind": "paused,resumed", "after": start}).json()["events"]
        assert paused["fields"]["mode"] == resumed["fields"]["mode"]
        assert float(paused["fields"]["duration_ms"]) > 0
        assert float(resumed["fields"]["duration_ms"]) > 0
        if paused["fields"]["mode"] == "disk":  # the memory images it wrote
            assert int(paused["fields"]["bytes"]) > 1024 * 1024
        else:
            assert int(paused["fields"]["bytes"]) == 0
    finally:
        sbx.kill()
    killed = api.get(f"/sandboxes/{sbx.sandbox_id}/trace", params={"kind": "killed"})
    assert killed.json()["events"][0]["fields"]["reason"] == "request"

    short = Sandbox.create(timeout=1)
    # The follow stream ends when the sandbox does: its last event says why.
    with api.stream("GET", f"/sandboxes/{short.sandbox_id}/trace",
                    params={"follow": "true"}) as response:
        last = [json.loads(line) for line in response.iter_lines() if line][-1]
    assert last["kind"] == "timeout" and last["fields"]["reason"] == "timeout"


def test_an_oom_kill_inside_is_an_error_event(api: httpx.Client) -> None:
    made = api.post("/sandboxes", json={"templateID": "base", "timeout": 120,
                                        "memoryMB": 128})
    assert made.status_code == 201, made.text
    sandbox_id = made.json()["sandboxID"]
    try:
        sbx = Sandbox.connect(sandbox_id)
        with pytest.raises(CommandExitException):
            sbx.commands.run("python3 -c 'x = bytearray(400 << 20)' # m-oom")
        oom = wait_event(api, sandbox_id, lambda e: e["kind"] == "oom_kill")
        assert oom["level"] == "error" and int(oom["fields"]["count"]) >= 1
        assert oom["fields"]["memory_mb"] == "128"
        hog = process_event(api, sbx, "m-oom", 0)["fields"]
        assert hog.get("signal") == 9 or hog.get("exit_code") == 137
    finally:
        api.delete(f"/sandboxes/{sandbox_id}")


def test_a_failed_resume_is_an_error_event(api: httpx.Client,
                                          slot_dir: Callable[[str], Path]) -> None:
    from e2b import SandboxException

    with Sandbox.create(timeout=120) as sbx:
        assert sbx.pause() is True
        (slot_dir(sbx.sandbox_id) / "suspend" / "images" / "pstree.img").unlink()
        with pytest.raises(SandboxException):
            sbx.connect()
        failed = api.get(f"/sandboxes/{sbx.sandbox_id}/trace",
                         params={"kind": "resume_failed"}).json()["events"]
        assert len(failed) == 1 and failed[0]["level"] == "error"
        assert failed[0]["fields"]["mode"] == "disk"
        sbx.connect(on_resume="reboot")


def test_reports_reach_the_sandbox_after_a_server_restart() -> None:
    """A server killed the hard way and started again binds each re-attached sandbox's
    socket anew (its stale file replaced), so envd's next report lands in its trace."""
    from bac_process import running

    with running("tracerestart", BAC_POOL_SIZE="0") as srv:
        key = srv.create_key("tracerestart")
        with httpx.Client(base_url=srv.url, headers={"X-API-KEY": key},
                          timeout=BOUND_S) as client:
            sbx = Sandbox.create(timeout=120, api_key=key, api_url=srv.url,
                                 sandbox_url=srv.url)
            sbx.commands.run("true # m-before")
            process_event(client, sbx, "m-before", 0)
            srv.kill9()
            srv.start()
            again = Sandbox.connect(sbx.sandbox_id, api_key=key, api_url=srv.url,
                                    sandbox_url=srv.url)
            again.commands.run("true # m-after-restart")
            seen = process_event(client, again, "m-after-restart", 0)
            assert seen["sandboxID"] == sbx.sandbox_id
            again.kill()


def test_a_sandbox_whose_processes_die_ends_with_reason_crash(
        api: httpx.Client, slot_dir: Callable[[str], Path]) -> None:
    sbx = Sandbox.create(timeout=120)
    state = json.loads((slot_dir(sbx.sandbox_id) / "state.json").read_text())
    os.kill(state["init_pid"], signal.SIGKILL)  # its envd, the sandbox's PID 1, from outside
    # The follow stream ends when the sandbox does; its last event says why.
    with api.stream("GET", f"/sandboxes/{sbx.sandbox_id}/trace",
                    params={"follow": "true"}) as response:
        last = [json.loads(line) for line in response.iter_lines() if line][-1]
    assert last["kind"] == "died" and last["fields"]["reason"] == "crash"
    assert api.get(f"/sandboxes/{sbx.sandbox_id}").status_code == 404
