"""Templates made of build step layers, the isolation of a step, and recovery after a crash."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest
from backend_harness import SandboxFactory, footprint, new_id
from test_build_step_support import BuildWatch, Output, layers_dir, run_step

from bac_server.backends.base import SandboxSpec, TemplateImage
from bac_server.backends.namespaces import NamespaceBackend, NamespaceConfig
from bac_server.host import LXCFS_DIR
from bac_server.host._syscalls import umount

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]


async def test_sandbox_on_three_layers_sees_the_union_and_template_env(
        backend: NamespaceBackend, template: TemplateImage,
        make_sandbox: SandboxFactory) -> None:
    """A sandbox on base + two step layers sees files of all three (the topmost winning,
    deletions honoured) and starts every process with the template's ENV, which the
    create request's env vars override."""
    first = await run_step(backend, (template.rootfs,),
                           "mkdir -p /opt/app && echo one >/opt/app/version && "
                           "echo a >/opt/app/first && rm /etc/issue.net")
    assert first.code == 0, first.output.lines
    second = await run_step(backend, (first.upper, template.rootfs),
                            "echo two >/opt/app/version && echo b >/opt/app/second && "
                            "rm /opt/app/first && pip --version >/dev/null", user="root")
    assert second.code == 0, second.output.lines
    image = TemplateImage("three-layers", template.rootfs, lowers=(second.upper, first.upper),
                          env=(("APP_HOME", "/opt/app"), ("MODE", "template")))
    sbx = await make_sandbox(template=image, env_vars={"MODE": "request"})
    seen = await sbx.run("cat /opt/app/version /opt/app/second; ls /opt/app; "
                         "test -e /etc/issue.net || echo no-issue; test -e /etc/issue && "
                         "echo base-kept; echo $APP_HOME $MODE")
    assert seen.stdout.split("\n")[:-1] == ["two", "b", "second", "version", "no-issue",
                                            "base-kept", "/opt/app request"]
    state = json.loads((footprint(backend, sbx.id).slot_dir / "state.json").read_text())
    assert state["layers"] == [str(second.upper), str(first.upper), str(template.rootfs)]


async def test_step_isolation_is_a_sandboxs(backend: NamespaceBackend, template: TemplateImage,
                                            make_sandbox: SandboxFactory) -> None:
    """A step's OCI config has the same namespaces, id mapping, seccomp, capabilities,
    masked and read-only paths as a sandbox's, no envd mounts (bundle, trace socket), and
    its own process."""
    sbx = await make_sandbox()
    sandbox_config = json.loads((footprint(backend, sbx.id).slot_dir / "config.json")
                                .read_text())
    output = Output()
    task = asyncio.create_task(run_step(backend, (template.rootfs,),
                                        "echo running; sleep 1000", output=output))
    await output.wait_for("running")
    configs = [json.loads((BuildWatch.take(backend).slot_dir / "config.json").read_text())]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (step_config,) = configs
    def kinds(config: dict[str, object]) -> list[str]:
        return [ns["type"] for ns in config["linux"]["namespaces"]]  # type: ignore[index]

    assert kinds(step_config) == kinds(sandbox_config)
    for key in ("uidMappings", "gidMappings", "seccomp", "maskedPaths", "readonlyPaths",
                "rootfsPropagation"):
        assert step_config["linux"][key] == sandbox_config["linux"][key], key  # type: ignore[index]
    for key in ("capabilities", "rlimits", "noNewPrivileges"):
        assert step_config["process"][key] == sandbox_config["process"][key], key  # type: ignore[index]
    assert [m["destination"] for m in step_config["mounts"]] == [  # type: ignore[attr-defined]
        m["destination"] for m in sandbox_config["mounts"]
        # envd's bundle and trace socket, and LXCFS's /proc files (a sandbox's view of
        # its own limits; a step sees the host's)
        if m["destination"] not in ("/opt/bac", "/run/bac")
        and not str(m.get("source", "")).startswith(str(LXCFS_DIR))]
    assert step_config["process"]["args"] == ["/bin/sh", "-c", "echo running; sleep 1000"]  # type: ignore[index]


_CRASHING_SERVER = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from bac_server.backends.base import BuildStep
    from bac_server.backends.namespaces import NamespaceBackend, NamespaceConfig

    async def main():
        backend = NamespaceBackend(NamespaceConfig(data_dir=Path(sys.argv[1])))
        step = BuildStep(lowers=(Path(sys.argv[2]),), upper=Path(sys.argv[3]),
                         argv=("/bin/sh", "-c", "echo kept >/kept; echo started; sleep 1000"))
        def output(stream, line):
            print(line, flush=True)
        await backend.run_build_step(step, output)

    asyncio.run(main())
""")


async def test_recovery_tears_down_a_crashed_servers_build(backend: NamespaceBackend,
                                                           template: TemplateImage) -> None:
    """When the server dies mid-step, the next start on the same data dir tears the build
    slot down (processes, mounts, cgroups, veth, lease, work dir) and keeps ``upper``."""
    data_dir = backend.config.data_dir / "crashed"
    upper = layers_dir(backend) / "layer"
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CRASHING_SERVER, str(data_dir), str(template.rootfs),
        str(upper), stdout=asyncio.subprocess.PIPE)
    assert server.stdout is not None
    try:
        assert await server.stdout.readline() == b"started\n"
        watch = BuildWatch.take(NamespaceBackend(NamespaceConfig(data_dir=data_dir)))
    finally:
        server.send_signal(signal.SIGKILL)
        await server.wait()
    assert watch.leftovers()  # the step outlived its server
    again = NamespaceBackend(NamespaceConfig(data_dir=data_dir))
    try:
        assert await again.list() == []  # recovery ran: a build is never re-attached
        assert watch.leftovers() == []
        assert (upper / "kept").read_text() == "kept\n"
        assert os.listdir(upper.parent) == ["layer"]
    finally:
        await again.close()


async def test_runc_runs_steps_too(template: TemplateImage, data_dir: Path) -> None:
    """With runc as the runtime a step writes its layer, streams output and is cancelled
    without leaving anything behind."""
    backend = NamespaceBackend(NamespaceConfig(data_dir=data_dir / "runc", runtime="runc"))
    try:
        result = await run_step(backend, (template.rootfs,),
                                "rm /etc/motd; echo out; echo err >&2; id -u", user="root",
                                cwd="/made/by/runc")
        assert result.code == 0
        assert (result.output.stdout, result.output.stderr) == (["out", "0"], ["err"])
        assert os.lstat(result.upper / "etc/motd").st_rdev == 0
        assert (result.upper / "made/by/runc").is_dir()
        output = Output()
        task = asyncio.create_task(run_step(backend, (template.rootfs,),
                                            "echo started; sleep 1000", output=output))
        await output.wait_for("started")
        watch = BuildWatch.take(backend)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert watch.leftovers() == []
    finally:
        await backend.close()


async def test_layered_sandbox_checkpoints_copies_and_wakes(
        backend: NamespaceBackend, template: TemplateImage,
        make_sandbox: SandboxFactory) -> None:
    """A sandbox on a step layer keeps its layers through a files-only checkpoint and a
    copy made from it, and through a suspend whose overlay is gone before the wake (a
    reboot): each time it sees the layer's file and its own."""
    layer = await run_step(backend, (template.rootfs,), "echo from-layer >/layer-file")
    image = TemplateImage("one-layer", template.rootfs, lowers=(layer.upper,),
                          env=(("FROM_TEMPLATE", "yes"),))
    sbx = await make_sandbox(template=image)
    await sbx.run("echo mine >/tmp/own", user="root")
    info = await backend.checkpoint(sbx.id, new_id("c"), memory=False)
    copy_spec = SandboxSpec(sandbox_id=new_id(), template=image)
    make_sandbox.created.append(copy_spec.sandbox_id)
    copy = await make_sandbox.attach(
        copy_spec, await backend.create_from(copy_spec, info.checkpoint_id, source_token=None))
    check = "cat /layer-file /tmp/own; echo $FROM_TEMPLATE"
    assert (await copy.run(check)).stdout.split() == ["from-layer", "mine", "yes"]
    await backend.delete_checkpoint(info.checkpoint_id)

    rootfs = footprint(backend, sbx.id).slot_dir / "rootfs"
    await backend.suspend(sbx.id, memory=False)
    umount(str(rootfs))  # what a reboot does to the overlay
    await backend.wake(sbx.spec, memory=False)
    assert (await sbx.run(check)).stdout.split() == ["from-layer", "mine", "yes"]
