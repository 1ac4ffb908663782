"""Kernel interfaces namespaces do not isolate are refused, even to root in the sandbox.

Each case calls the raw syscall with arguments that would succeed (or at least get past the
permission check) if the call were allowed, and fails if it is not refused."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from backend_harness import Sandbox, SandboxFactory, backend_and_factory

from bac_server.backends.base import TemplateImage
from bac_server.backends.namespaces import NamespaceBackend

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

HARNESS = """
import ctypes, errno, json, os, socket, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    ctypes.set_errno(0)
    ret = libc.syscall(ctypes.c_long(nr), *args)
    return ret, ctypes.get_errno()
buf = ctypes.create_string_buffer(256)
"""

# name -> (python expression giving (ret, errno), errnos that count as refused)
CASES = {
    "keyctl": ("call(250, ctypes.c_long(0), ctypes.c_long(-3), ctypes.c_long(1))", {1}),
    "add_key": ("call(248, b'user', b'k', b'v', ctypes.c_long(1), ctypes.c_long(-3))", {1}),
    "request_key": ("call(249, b'user', b'k', None, ctypes.c_long(-3))", {1}),
    "bpf": ("call(321, ctypes.c_long(0), buf, ctypes.c_long(72))", {1}),
    "io_uring_setup": ("call(425, ctypes.c_long(8), buf)", {1}),
    "userfaultfd": ("call(323, ctypes.c_long(0))", {1}),
    "perf_event_open": (
        "call(298, ctypes.create_string_buffer(struct.pack('IIQ', 1, 128, 0) + bytes(112)),"
        " ctypes.c_long(0), ctypes.c_long(-1), ctypes.c_long(-1), ctypes.c_long(0))", {1}),
    "init_module": ("call(175, buf, ctypes.c_long(16), b'')", {1}),
    "finit_module": ("call(313, ctypes.c_long(os.open('/bin/true', os.O_RDONLY)), b'', "
                     "ctypes.c_long(0))", {1}),
    "delete_module": ("call(176, b'overlay', ctypes.c_long(0))", {1}),
    "kexec_load": ("call(246, ctypes.c_long(0), ctypes.c_long(0), None, ctypes.c_long(0))",
                   {1}),
    "mount": ("call(165, b'none', b'/mnt', b'tmpfs', ctypes.c_long(0), None)", {1}),
    "umount2": ("call(166, b'/proc', ctypes.c_long(2))", {1}),
    "pivot_root": ("call(155, b'/tmp', b'/tmp')", {1}),
    "unshare_user": ("call(272, ctypes.c_long(0x10000000))", {1}),
    "unshare_net": ("call(272, ctypes.c_long(0x40000000))", {1}),
    "unshare_mount": ("call(272, ctypes.c_long(0x20000))", {1}),
    "setns": ("call(308, ctypes.c_long(os.open('/proc/1/ns/net', os.O_RDONLY)), "
              "ctypes.c_long(0))", {1}),
    "clone_newuser": ("call(56, ctypes.c_long(0x10000000 | 17), None, None, None, None)",
                      {1, 38}),
    "clone3": ("call(435, buf, ctypes.c_long(88))", {38}),
    "ptrace_attach_envd": ("call(101, ctypes.c_long(16), ctypes.c_long(1), None, None)", {1}),
    "process_vm_readv": ("call(310, ctypes.c_long(1), buf, ctypes.c_long(1), buf, "
                         "ctypes.c_long(1), ctypes.c_long(0))", {1}),
    "open_by_handle_at": ("call(304, ctypes.c_long(-100), buf, ctypes.c_long(0))", {1}),
    "swapon": ("call(167, b'/tmp/swap', ctypes.c_long(0))", {1}),
    "syslog_read": ("call(103, ctypes.c_long(3), buf, ctypes.c_long(256))", {1}),
    "reboot_bad_magic": ("call(169, ctypes.c_long(0), ctypes.c_long(0), "
                         "ctypes.c_long(0), None)", {1}),
    "sethostname": ("call(170, b'escaped', ctypes.c_long(7))", {1}),
    "personality_read_implies_exec": ("call(135, ctypes.c_long(0x0400000))", {1, 38}),
    "fsopen": ("call(430, b'tmpfs', ctypes.c_long(0))", {1}),
    "move_mount": ("call(429, ctypes.c_long(-100), b'/tmp', ctypes.c_long(-100), b'/mnt', "
                   "ctypes.c_long(0))", {1}),
}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def shared(template: TemplateImage, data_dir: Path) -> AsyncIterator[Sandbox]:
    """One sandbox for the refusal checks: none of them changes its state when refused."""
    async with backend_and_factory(template, data_dir=data_dir) as (_backend, factory):
        yield await factory()


@pytest.mark.parametrize("name", sorted(CASES))
async def test_syscall_is_refused_to_root(shared: Sandbox, name: str) -> None:
    """The syscall fails with a refusal errno for root inside the sandbox."""
    expression, refused = CASES[name]
    result = await shared.python(HARNESS + f"print(json.dumps({expression}))\n")
    assert result.exit_code == 0, result.stderr
    ret, err = (int(x) for x in result.stdout.strip().strip("[]").split(","))
    assert ret == -1 and err in refused, f"{name} returned {ret} (errno {err})"


@pytest.mark.parametrize(("family", "kind"), [
    ("AF_VSOCK", "SOCK_STREAM"), ("AF_ALG", "SOCK_SEQPACKET"), ("AF_PACKET", "SOCK_RAW"),
    ("AF_INET", "SOCK_RAW"), ("AF_INET6", "SOCK_RAW"),
])
async def test_dangerous_sockets_are_refused(shared: Sandbox, family: str, kind: str) -> None:
    """vsock (the outer VM's channel), AF_ALG, packet and raw sockets cannot be opened."""
    code = (f"import socket\ntry:\n    socket.socket(socket.{family}, socket.{kind})\n"
            "    print('opened')\nexcept OSError as exc:\n    print('refused', exc.errno)\n")
    result = await shared.python(code)
    assert result.stdout.startswith("refused"), result.stdout + result.stderr


async def test_seccomp_and_no_extra_capabilities(shared: Sandbox) -> None:
    """Every sandbox process runs in seccomp filter mode without admin capabilities."""
    status = (await shared.run("grep -E '^(Seccomp|CapBnd|CapEff):' /proc/self/status",
                            user="root")).stdout
    fields = dict(line.split(":\t") for line in status.strip().splitlines())
    assert fields["Seccomp"].strip() == "2"
    bounding = int(fields["CapBnd"], 16)
    for cap in (12, 13, 16, 17, 18, 19, 21, 22, 24, 25, 27, 38, 39):
        # NET_ADMIN NET_RAW SYS_MODULE SYS_RAWIO SYS_CHROOT SYS_PTRACE SYS_ADMIN SYS_BOOT
        # SYS_RESOURCE SYS_TIME MKNOD PERFMON BPF
        assert not bounding & (1 << cap), f"capability {cap} in the bounding set"


async def test_reused_compiled_filter_is_enforced(backend: NamespaceBackend,
                                                  make_sandbox: SandboxFactory) -> None:
    """Sandboxes started with crun's cached, compiled filter refuse the same syscalls."""
    await make_sandbox()  # makes sure a compiled filter is cached in this process
    sbx = await make_sandbox()
    slot = (backend.config.claims_dir / sbx.id).read_text()
    config = json.loads((backend.config.sandboxes_dir / slot / "config.json").read_text())
    if backend.config.runtime == "crun":
        assert "run.oci.seccomp_bpf_data" in config.get("annotations", {})
    for name in ("mount", "unshare_user", "bpf", "io_uring_setup", "keyctl", "clone3"):
        expression, refused = CASES[name]
        result = await sbx.python(HARNESS + f"print(json.dumps({expression}))\n")
        ret, err = (int(x) for x in result.stdout.strip().strip("[]").split(","))
        assert ret == -1 and err in refused, f"{name} returned {ret} (errno {err})"
