"""What tests and benchmarks may ask of a ``NamespaceBackend`` beyond the backend protocols.

The server never calls these. They let a test wait on the backend's background work
instead of sleeping (a pool's refill, the write of a suspend or a checkpoint through to
the disk), see what the started backend found (CRIU) and whether a flush is still pending,
and let a benchmark change the pool's size between measurements. Tests reach the
backend's insides only through here, so what they rely on is named, typed and kept with
the code it reads::

    from bac_server.backends.namespaces import testing
    await testing.wait_pool_full(backend, template)
"""

from __future__ import annotations

from bac_server.backends.base import TemplateImage

from ._backend import NamespaceBackend
from .checkpoint import Criu


async def wait_pool_full(backend: NamespaceBackend, template: TemplateImage) -> None:
    """Wait until the pool of ``template`` has been refilled (of sandboxes restored from
    its start snapshot, when it names one)."""
    await (await backend._started()).pool.wait_full(template)


async def set_pool_size(backend: NamespaceBackend, size: int) -> None:
    """Change how many booted slots per hot template are kept. Slots above a lowered
    target stay until handed out; raising it starts refilling at once."""
    if size < 0:
        raise ValueError("pool size must be >= 0")
    (await backend._started()).pool.resize(size)


async def forget_demand(backend: NamespaceBackend) -> int:
    """As if the pool's demand window had passed with no create: each key back to its
    base size, the slots a burst had added destroyed; how many went."""
    return await (await backend._started()).pool.forget_demand()


async def suspend_flushed(backend: NamespaceBackend, sandbox_id: str) -> None:
    """Wait until the sandbox's last suspend is on disk (at once if it is, or if a wake
    made writing it pointless)."""
    await (await backend._started()).suspender.flushed(sandbox_id)


def suspend_flushing(backend: NamespaceBackend, sandbox_id: str) -> bool:
    """Whether the sandbox's last suspend is still to be written through to the disk."""
    return backend._parts is not None and backend._parts.suspender.flushing(sandbox_id)


async def checkpoint_flushed(backend: NamespaceBackend, checkpoint_id: str) -> None:
    """Wait until the checkpoint is on disk (at once if it is)."""
    await (await backend._started()).checkpointer.flushed(checkpoint_id)


def criu(backend: NamespaceBackend) -> Criu | None:
    """The CRIU the started backend found (None: memory cannot be saved here)."""
    if backend._parts is None:
        raise RuntimeError("the backend is not started")
    return backend._parts.suspender.criu


def init_pid(backend: NamespaceBackend, sandbox_id: str) -> int:
    """The host pid of the sandbox's first process (its envd), for a test that reads what
    the kernel says of it (its cgroups, its score) without the backend's help."""
    if backend._parts is None:
        raise RuntimeError("the backend is not started")
    pid = backend._parts.slots.record(sandbox_id).init_pid
    if pid is None:
        raise RuntimeError(f"sandbox {sandbox_id} has no running processes")
    return pid


def relay_ca_pem(backend: NamespaceBackend, sandbox_id: str) -> str | None:
    """The certificate of the CA the sandbox's egress relay signs with, as PEM (None: not
    made yet), for a test that checks the sandbox trusts that one."""
    if backend._parts is None:
        raise RuntimeError("the backend is not started")
    parts = backend._parts
    return parts.ctx.egress.made_relay_ca(parts.slots.record(sandbox_id).veth)
