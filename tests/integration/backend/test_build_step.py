"""Template build steps on the namespace backend: layers, output, user, cwd, binds, limits."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from pathlib import Path

import pytest
from backend_harness import SandboxFactory, data_dir_leftovers
from test_build_step_support import SANDBOX_ROOT, BuildWatch, Output, layers_dir, run_step

from bac_server.backends.base import (
    Builder,
    BuildStep,
    ResourceLimitError,
    SandboxSetupError,
    TemplateImage,
)
from bac_server.backends.namespaces import NamespaceBackend

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]


async def test_backend_is_a_builder(backend: NamespaceBackend) -> None:
    """The namespace backend implements the Builder protocol."""
    assert isinstance(backend, Builder)


async def test_writes_land_in_upper_owned_by_the_sandbox_range(
        backend: NamespaceBackend, template: TemplateImage) -> None:
    """Files a step writes are in ``upper``, owned by the sandbox's ids, not the host's."""
    result = await run_step(backend, (template.rootfs,),
                            "echo root >/made-by-root && su user -c 'echo u >/tmp/by-user'")
    assert result.code == 0, result.output.lines
    upper = result.upper
    root_file, user_file = os.lstat(upper / "made-by-root"), os.lstat(upper / "tmp/by-user")
    assert (root_file.st_uid, root_file.st_gid) == (SANDBOX_ROOT, SANDBOX_ROOT)
    assert (user_file.st_uid, user_file.st_gid) == (SANDBOX_ROOT + 1000, SANDBOX_ROOT + 1000)
    top = os.lstat(upper)
    assert (top.st_uid, stat.S_IMODE(top.st_mode)) == (SANDBOX_ROOT, 0o755)
    assert not (template.rootfs / "made-by-root").exists()  # the lower layer is untouched
    assert sorted(p.name for p in upper.iterdir()) == ["made-by-root", "tmp"]  # no stubs
    assert [p.name for p in upper.parent.iterdir()] == ["layer"]  # work dir removed
    assert data_dir_leftovers(backend) == []


async def test_deletion_is_a_whiteout_that_hides_the_file_from_sandboxes(
        backend: NamespaceBackend, template: TemplateImage,
        make_sandbox: SandboxFactory) -> None:
    """Deleting a lower file leaves a whiteout; a sandbox on that layer does not see it."""
    assert (template.rootfs / "etc/motd").exists()
    result = await run_step(backend, (template.rootfs,), "rm /etc/motd && mkdir -p /srv/kept")
    assert result.code == 0, result.output.lines
    whiteout = os.lstat(result.upper / "etc/motd")
    assert stat.S_ISCHR(whiteout.st_mode) and whiteout.st_rdev == 0
    image = TemplateImage("layered", template.rootfs, lowers=(result.upper,))
    sbx = await make_sandbox(template=image)
    seen = await sbx.run("test -e /etc/motd; echo $?; test -d /srv/kept && echo kept")
    assert seen.stdout.split() == ["1", "kept"]


async def test_exit_codes_and_signals(backend: NamespaceBackend,
                                      template: TemplateImage) -> None:
    """The exit code is returned as is; death by a signal is returned as -signal."""
    assert (await run_step(backend, (template.rootfs,), "exit 0")).code == 0
    assert (await run_step(backend, (template.rootfs,), "exit 7")).code == 7
    # The command is its namespace's init: a fault is a signal it cannot ignore.
    crash = "exec python3 -c 'import ctypes; ctypes.string_at(0)'"
    assert (await run_step(backend, (template.rootfs,), crash)).code == -11


async def test_output_streams_keep_their_order(backend: NamespaceBackend,
                                               template: TemplateImage) -> None:
    """Every line arrives, on its stream, in the order it was printed there."""
    script = "for i in $(seq 1 300); do echo out$i; echo err$i >&2; done; printf tail"
    result = await run_step(backend, (template.rootfs,), script)
    assert result.code == 0
    assert result.output.stdout == [f"out{i}" for i in range(1, 301)] + ["tail"]
    assert result.output.stderr == [f"err{i}" for i in range(1, 301)]


async def test_long_lines_are_split_and_bad_bytes_replaced(
        backend: NamespaceBackend, template: TemplateImage) -> None:
    """A 20000-byte line comes in pieces that add up to it; invalid UTF-8 becomes U+FFFD."""
    script = "head -c 20000 /dev/zero | tr '\\0' x; echo; printf 'a\\377b\\n'"
    result = await run_step(backend, (template.rootfs,), script)
    lines = result.output.stdout
    assert len(lines) > 2 and all(len(line) <= 8192 for line in lines)
    assert "".join(lines[:-1]) == "x" * 20000
    assert lines[-1] == "a\ufffdb"


async def test_output_is_streamed_while_the_step_runs(backend: NamespaceBackend,
                                                      template: TemplateImage) -> None:
    """A line reaches the callback before the step ends: the step waits for the test's
    answer to it (a file appearing in a bound directory)."""
    control = layers_dir(backend) / "control"
    control.mkdir(mode=0o755)
    output = Output()

    async def answer() -> None:
        await output.wait_for("waiting")
        (control / "go").write_text("")

    answering = asyncio.create_task(answer())
    script = "echo waiting; while [ ! -e /control/go ]; do sleep 0.02; done; echo done"
    result = await run_step(backend, (template.rootfs,), script, output=output,
                            binds=((control, "/control"),), timeout_s=60)
    await answering
    assert result.code == 0
    assert result.output.stdout == ["waiting", "done"]


async def test_user_by_name_uid_and_group(backend: NamespaceBackend,
                                          template: TemplateImage) -> None:
    """``user`` takes a name, a uid or uid:gid, resolved in the step's own /etc files."""
    for user, expected in [("user", "1000 1000"), ("1000", "1000 1000"), ("root", "0 0"),
                           ("1000:0", "1000 0"), ("4321", "4321 0"), ("user:users", "1000 100")]:
        result = await run_step(backend, (template.rootfs,), 'echo "$(id -u) $(id -g) $HOME"',
                                user=user)
        assert result.code == 0, (user, result.output.lines)
        uid_gid, home = result.output.stdout[0].rsplit(" ", 1)
        assert uid_gid == expected, user
        assert home == {"user": "/home/user", "1000": "/home/user", "root": "/root",
                        "1000:0": "/home/user"}.get(user, "/home/user" if "user" in user
                                                    else "/"), user


async def test_unknown_user_fails_without_running(backend: NamespaceBackend,
                                                  template: TemplateImage) -> None:
    """An unknown user name fails clearly, before the command runs, leaving nothing."""
    output = Output()
    upper = layers_dir(backend) / "layer"
    with pytest.raises(SandboxSetupError, match="unable to find user 'nobody-here'"):
        await run_step(backend, (template.rootfs,), "touch /ran", upper=upper, output=output,
                       user="nobody-here")
    assert output.lines == [] and not (upper / "ran").exists()
    assert data_dir_leftovers(backend) == []


async def test_cwd_is_created_when_missing(backend: NamespaceBackend,
                                           template: TemplateImage) -> None:
    """A missing working directory is made (as a WORKDIR would be) and kept in the layer."""
    result = await run_step(backend, (template.rootfs,), "pwd; touch here", cwd="/app/src/x")
    assert result.code == 0, result.output.lines
    assert result.output.stdout == ["/app/src/x"]
    assert (result.upper / "app/src/x/here").is_file()


async def test_env_reaches_the_process(backend: NamespaceBackend,
                                       template: TemplateImage) -> None:
    """The step's environment is the process's; PATH and HOME have defaults."""
    result = await run_step(backend, (template.rootfs,), 'echo "$GREETING|$EMPTY|$PATH|$HOME"',
                            env=(("GREETING", "hello world"), ("EMPTY", "")))
    assert result.output.stdout == [
        "hello world||/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin|/root"]


async def test_bind_is_read_only_and_leaves_no_stub(backend: NamespaceBackend,
                                                    template: TemplateImage) -> None:
    """A bound host directory is readable, not writable, and its mount point is not left
    in the layer."""
    context = layers_dir(backend) / "context"
    context.mkdir(mode=0o755)
    (context / "app.txt").write_text("from the host\n")
    (context / "app.txt").chmod(0o644)
    script = "cat /ctx/deep/app.txt; touch /ctx/deep/new || echo denied; echo x > /kept"
    result = await run_step(backend, (template.rootfs,), script,
                            binds=((context, "/ctx/deep"),))
    assert result.code == 0, result.output.lines
    assert result.output.stdout == ["from the host", "denied"]
    assert "Read-only file system" in result.output.stderr[0]
    assert sorted(p.name for p in result.upper.iterdir()) == ["kept"]
    assert sorted(p.name for p in context.iterdir()) == ["app.txt"]


async def test_timeout_kills_the_whole_step(backend: NamespaceBackend,
                                            template: TemplateImage) -> None:
    """At ``timeout_s`` every process of the step is killed and -SIGKILL returned."""
    output = Output()
    watch: list[BuildWatch] = []

    async def observe() -> None:
        await output.wait_for("started")
        watch.append(BuildWatch.take(backend))

    observing = asyncio.create_task(observe())
    started = time.monotonic()
    result = await run_step(backend, (template.rootfs,),
                            "sleep 1000 & sleep 1000 & echo started; wait", output=output,
                            timeout_s=2)
    await observing
    assert result.code == -9
    assert time.monotonic() - started < 15
    assert len(watch[0].processes) >= 3
    assert watch[0].leftovers() == []
    assert "time limit of 2 s" in output.stderr[-1]


async def test_cancel_releases_everything_but_upper(backend: NamespaceBackend,
                                                    template: TemplateImage) -> None:
    """Cancelling a running step kills it and leaves no netns, veth, cgroup, mount, lease,
    runtime state or process; ``upper`` keeps what the step wrote."""
    output = Output()
    upper = layers_dir(backend) / "layer"
    task = asyncio.create_task(run_step(
        backend, (template.rootfs,), "echo partial >/partial; echo started; sleep 1000",
        upper=upper, output=output))
    await output.wait_for("started")
    watch = BuildWatch.take(backend)
    assert watch.leftovers()  # the watch sees the running slot
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert watch.leftovers() == []
    assert (upper / "partial").read_text() == "partial\n"
    assert data_dir_leftovers(backend) == []


async def test_memory_limit_kills_and_says_so(backend: NamespaceBackend,
                                              template: TemplateImage) -> None:
    """A step above ``memory_mb`` is killed by the kernel and the output says why."""
    script = "python3 -c 'x = bytearray(300 << 20); print(len(x))'"
    result = await run_step(backend, (template.rootfs,), f"exec {script}", memory_mb=64)
    assert result.code == -9
    assert "out of memory (limit 64 MiB)" in result.output.stderr[-1]
    result = await run_step(backend, (template.rootfs,), f"{script}; echo survived",
                            memory_mb=64)
    assert result.code == 0 and result.output.stdout == ["survived"]
    assert "1 process(es) of the step ran out of memory" in result.output.stderr[-1]


async def test_bad_steps_are_refused(backend: NamespaceBackend,
                                     template: TemplateImage) -> None:
    """Bad input is refused with the field named, before anything is made."""
    base = layers_dir(backend)
    taken = base / "taken"
    taken.mkdir()
    cases: list[tuple[dict[str, object], type[Exception], str]] = [
        ({"upper": taken}, SandboxSetupError, "already exists"),
        ({"upper": base / "no/parent"}, SandboxSetupError, "parent of upper"),
        ({"argv": ()}, SandboxSetupError, "argv"),
        ({"cwd": "relative"}, SandboxSetupError, "cwd"),
        ({"binds": ((base, "/proc/x"),)}, SandboxSetupError, "cannot bind over"),
        ({"binds": ((base / "missing", "/x"),)}, SandboxSetupError, "does not exist"),
        ({"env": (("A=B", "c"),)}, SandboxSetupError, "environment"),
        ({"vcpus": 99}, ResourceLimitError, "vcpus"),
        ({"memory_mb": 1}, ResourceLimitError, "memory_mb"),
        ({"lowers": (base / "missing",)}, SandboxSetupError, "missing"),
        ({"lowers": (base,)}, SandboxSetupError, "not the sandbox root"),
    ]
    for overrides, error, message in cases:
        fields: dict[str, object] = {"lowers": (template.rootfs,), "upper": base / "new",
                                     "argv": ("true",)}
        step = BuildStep(**(fields | overrides))  # type: ignore[arg-type]
        with pytest.raises(error, match=message):
            await backend.run_build_step(step, Output())
    assert not (base / "new").exists()
    assert data_dir_leftovers(backend) == []


async def test_many_layers_mount_past_the_option_page(backend: NamespaceBackend,
                                                      template: TemplateImage,
                                                      make_sandbox: SandboxFactory) -> None:
    """120 lower layers (a lowerdir option far over 4096 bytes) work for steps and
    sandboxes; the topmost layer holding a file wins."""
    parent = layers_dir(backend)
    lowers: list[Path] = []
    for index in range(120):
        layer = parent / f"layer-with-a-long-name-to-fill-the-option-page-{index:03d}"
        (layer / "layers").mkdir(parents=True)
        (layer / "layers" / str(index)).write_text(f"{index}\n")
        (layer / "layers" / "top").write_text(f"{index}\n")
        for path in (layer, layer / "layers", *(layer / "layers").iterdir()):
            os.chown(path, SANDBOX_ROOT, SANDBOX_ROOT)
        lowers.insert(0, layer)
    assert len(":".join(map(str, lowers))) > 4096
    result = await run_step(backend, (*lowers, template.rootfs),
                            "ls /layers | wc -l; cat /layers/top")
    assert result.code == 0, result.output.lines
    assert result.output.stdout == ["121", "119"]
    sbx = await make_sandbox(template=TemplateImage("many", template.rootfs,
                                                    lowers=tuple(lowers)))
    assert (await sbx.run("cat /layers/0 /layers/top")).stdout.split() == ["0", "119"]
