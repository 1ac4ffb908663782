"""The backend an API replica drives when sandboxes run on node agents (``bac node``).

It is a ``Backend`` (with pause, fleet pause, network control, checkpoints, the trace and
dialing) over every node in the store: a create is placed (``NodeStore.place`` with the
``_placement`` policy, checked beside the node's create: ``create``) and sent to its
node; every other call goes to the node the
sandbox's placement names. The placements live in the store, so any replica finds any
sandbox; this process keeps a read cache of them.

Every ``heartbeat_s`` it reads the nodes, marks lost those silent for ``lost_after_s``
(one conditional update, idempotent across replicas), and tells its watcher which
sandboxes became unreachable or reachable again. A sandbox on a lost node is never
placed elsewhere: the node may still run it (docs/scale-out.md, *Failure behaviour*).
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import logging
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bac_server.backends.base import (
    BuildStep,
    CheckpointInfo,
    CheckpointNotFound,
    NoCapacity,
    NodeUnreachable,
    NodeWatcher,
    OutputCallback,
    RelayedAnswer,
    ResourceUsage,
    SandboxEndpoint,
    SandboxNotFound,
    SandboxSetupError,
    SandboxSpec,
    SandboxStatus,
    TraceSink,
    VolumeBind,
    VolumeMountFailed,
)
from bac_server.backends.egress import EgressPolicy, NetworkUsage
from bac_server.store import (
    Chooser,
    NodeLoad,
    NodeRecord,
    NodeState,
    NodeStore,
    PlacedKind,
    Placement,
)

from ._placement import spread
from ._remote import RemoteNode

log = logging.getLogger(__name__)


def _no_volume(volume_id: str) -> Exception:
    return FileNotFoundError(errno.ENOENT, f"volume {volume_id} is kept on no node")

# Refreshes between two sweeps for stale copies (``_sweep_stale``).
STALE_SWEEP_EVERY = 10

class NodeFleet:
    name = "nodes"
    # Every node runs the namespace backend with CRIU (what ``bac node`` checks at start).
    memory_checkpoints = True

    def __init__(self, *, node_store: NodeStore, token: str, heartbeat_s: float = 5.0,
                 lost_after_s: float = 30.0) -> None:
        self._store = node_store
        self._token = token
        self.heartbeat_s = heartbeat_s
        self.lost_after_s = lost_after_s
        self._nodes: dict[str, RemoteNode] = {}
        self._states: dict[str, NodeState] = {}
        self._where: dict[str, str] = {}  # object id -> node id (a cache of placements)
        self._loads: dict[str, NodeLoad] = {}  # the placement's guess (``create``)
        # Creates sent to a guessed node whose placement is not committed yet: what a
        # refresh's read of the store cannot see (sandbox id -> node id, memory).
        self._inflight: dict[str, tuple[str, int]] = {}
        self._watcher: NodeWatcher | None = None
        self._telling: set[asyncio.Task[None]] = set()
        # Sandboxes told unreachable (their node lost): told reachable again when their
        # node is back or once found placed on another (moved, ``_move``).
        self._unreachable: set[str] = set()
        self._stale: set[tuple[str, str]] = set()  # (node, sandbox) seen stale last sweep
        self._sink: TraceSink | None = None
        self._task: asyncio.Task[None] | None = None

    # -- nodes -------------------------------------------------------------------------

    async def start(self) -> None:
        """Read the nodes and placements, then follow them."""
        await self.refresh()
        for p in await self._store.placements():
            self._where[p.object_id] = p.node_id
        self._task = asyncio.create_task(self._follow())

    def watch(self, watcher: NodeWatcher) -> None:
        self._watcher = watcher

    def nodes(self) -> list[NodeRecord]:
        return [n.record for n in self._nodes.values()]

    def placeable(self) -> list[str]:
        """The nodes a create through this replica may be sent to now, as of its last
        refresh: active, their heartbeat fresh (``GET /health``'s ``nodes``)."""
        fresh = datetime.now(UTC) - timedelta(seconds=self.lost_after_s)
        return sorted(n.node.node_id for n in self._placeable(fresh))

    def _placeable(self, fresh: datetime) -> list[NodeLoad]:
        return [n for n in self._loads.values() if n.node.heartbeat_at >= fresh
                and self._states.get(n.node.node_id) is NodeState.ACTIVE]

    async def refresh(self) -> None:
        """Mark silent nodes lost, read every node, tell the watcher what changed."""
        now = datetime.now(UTC)
        await self._store.mark_lost(now - timedelta(seconds=self.lost_after_s))
        records = await self._store.list_nodes()
        self._loads = {n.node.node_id: n for n in await self._store.loads(
            now - timedelta(seconds=self.lost_after_s))}
        for node_id, memory_mb in self._inflight.values():
            self._placed(node_id, memory_mb)  # guessed, their transaction not committed yet
        changed: list[tuple[str, bool]] = []
        for record in records:
            known = self._nodes.get(record.node_id)
            if known is None or (known.record.address, known.record.rpc_port,
                                 known.record.tunnel_port) != (
                    record.address, record.rpc_port, record.tunnel_port):
                if known is not None:
                    await known.close()
                self._nodes[record.node_id] = RemoteNode(record, self._token)
                if self._sink is not None:
                    self._nodes[record.node_id].follow_trace(self._sink)
            else:
                known.record = record
            before = self._states.get(record.node_id)
            self._states[record.node_id] = record.state
            lost = record.state is NodeState.LOST
            if before is not None and (before is NodeState.LOST) != lost:
                changed.append((record.node_id, not lost))
                log.warning("node %s %s", record.node_id,
                            "is lost: its sandboxes are unreachable" if lost
                            else "is back")
            elif before is None and lost:
                changed.append((record.node_id, False))
        for node_id, reachable in changed:
            if reachable:
                await self._drop_moved(node_id)
            ids = [p.object_id for p in await self._store.placements(node_id)
                   if p.kind is PlacedKind.SANDBOX]
            if reachable:
                self._unreachable.difference_update(ids)
            else:
                self._unreachable.update(ids)
            if ids and self._watcher is not None:
                await self._watcher(ids, reachable)

    async def _where_all(self) -> dict[str, str]:
        """Every placement, object id -> node id (one read)."""
        return {p.object_id: p.node_id for p in await self._store.placements()}

    async def _stale_on(self, node_id: str, placed: dict[str, str]) -> list[str]:
        """The sandboxes the node holds that ``placed`` puts on another node: moved
        (``_move``) while it was lost, so its copy is stale (suspended here, running
        there). One not placed anywhere is not among them: it is the leader's orphan
        sweep's."""
        node = self._nodes.get(node_id)
        if node is None:
            return []
        try:
            held = await node.list()
        except NodeUnreachable:
            return []
        return [s for s in held if placed.get(s, node_id) != node_id]

    async def _destroy_stale(self, node_id: str, sandbox_ids: Sequence[str]) -> None:
        for sandbox_id in sandbox_ids:
            log.warning("destroying node %s's stale copy of sandbox %s (moved to another "
                        "node while it was lost)", node_id, sandbox_id)
            try:
                await self._nodes[node_id].destroy(sandbox_id)
            except Exception:
                log.exception("destroying the stale copy of %s on node %s failed",
                              sandbox_id, node_id)

    async def _drop_moved(self, node_id: str) -> None:
        """A node back from lost: its stale copies go at once."""
        await self._destroy_stale(node_id, await self._stale_on(node_id,
                                                                await self._where_all()))

    async def _sweep_stale(self) -> None:
        """What ``_drop_moved`` missed (a node back while no replica ran): stale copies
        on the active nodes, destroyed when two sweeps in a row find them (a move in
        progress places the sandbox before its new node has it)."""
        seen: set[tuple[str, str]] = set()
        placed = await self._where_all()
        for node_id in list(self._nodes):
            if self._states.get(node_id) is NodeState.ACTIVE:
                seen.update((node_id, s) for s in await self._stale_on(node_id, placed))
        for node_id, sandbox_id in sorted(seen & self._stale):
            await self._destroy_stale(node_id, [sandbox_id])
        self._stale = seen - self._stale

    async def _follow(self) -> None:
        beats = 0
        while True:
            await asyncio.sleep(self.heartbeat_s)
            beats += 1
            try:
                await self.refresh()
                if beats % STALE_SWEEP_EVERY == 0:
                    await self._sweep_stale()
            except Exception:
                log.exception("reading the nodes failed")

    async def _node_of(self, object_id: str,
                       missing: Callable[[str], Exception] = SandboxNotFound) -> RemoteNode:
        node_id = self._where.get(object_id)
        if node_id is None or self._states.get(node_id) is NodeState.LOST:
            # Unknown here, or on a lost node: read it (another replica may have moved it).
            placed = await self._store.placement(object_id)
            if placed is None:
                self._where.pop(object_id, None)
                raise missing(object_id)
            node_id = self._where[object_id] = placed.node_id
        if object_id in self._unreachable and self._states.get(node_id) is not NodeState.LOST:
            self._unreachable.discard(object_id)
            self._tell([object_id])
        node = self._nodes.get(node_id)
        if node is None:
            await self.refresh()
            node = self._nodes.get(node_id)
            if node is None:
                raise NodeUnreachable(f"node {node_id} is not registered")
        return node

    # -- Backend -----------------------------------------------------------------------

    async def create(self, spec: SandboxSpec) -> SandboxEndpoint:
        """Placed by a guess from the loads read at the last refresh (plus this replica's
        placements since), the placement's transaction run beside the node's create: it
        accepts the guessed node only if it still fits under the lock, so the create
        pays no placement round trips. Should another replica have filled the node
        meanwhile, the sandbox is given back and placed the slow way."""
        fresh = datetime.now(UTC) - timedelta(seconds=self.lost_after_s)
        placement = Placement(spec.sandbox_id, PlacedKind.SANDBOX, "", spec.vcpus,
                              spec.memory_mb)
        if spec.volumes:
            return await self._create_beside(spec, placement, fresh)
        guess = spread(spec.memory_mb)(self._placeable(fresh))
        node = self._nodes.get(guess) if guess is not None else None
        if node is None:
            return await self._create_placed(spec, placement, fresh)

        def only_the_guess(loads: Sequence[NodeLoad]) -> str | None:
            fits = [n for n in loads if n.node.node_id == guess]
            return spread(spec.memory_mb)(fits)

        self._where[spec.sandbox_id] = node.node_id
        self._placed(node.node_id, spec.memory_mb)
        self._inflight[spec.sandbox_id] = (node.node_id, spec.memory_mb)
        placing = asyncio.create_task(self._store.place(placement, only_the_guess, fresh))
        placing.add_done_callback(lambda _t: self._inflight.pop(spec.sandbox_id, None))
        try:
            made = await node.create(spec)
        except BaseException:
            placed = (await asyncio.gather(placing, return_exceptions=True))[0]
            if placed == node.node_id:
                await self._unplace(spec.sandbox_id)
            self._placed(node.node_id, -spec.memory_mb)
            raise
        try:
            placed = await placing
        except BaseException:
            await self._give_back(node, spec)
            raise
        if placed == node.node_id:
            return made
        await self._give_back(node, spec)
        return await self._create_placed(spec, placement, fresh)

    async def _give_back(self, node: RemoteNode, spec: SandboxSpec) -> None:
        self._placed(node.node_id, -spec.memory_mb)
        self._where.pop(spec.sandbox_id, None)
        try:
            await node.destroy(spec.sandbox_id)
        except Exception:
            log.exception("giving back sandbox %s on node %s failed (the sweep will)",
                          spec.sandbox_id, node.node_id)

    async def _create_beside(self, spec: SandboxSpec, placement: Placement,
                             fresh: datetime) -> SandboxEndpoint:
        """A sandbox that will mount volumes: on the node that keeps them (the API checked
        that one node keeps them all, ``volumes_together``)."""
        kept = await self._store.placement(spec.volumes[0])
        if kept is None:
            raise VolumeMountFailed(f"volume {spec.volumes[0]} is kept on no node")
        node_id = kept.node_id

        def there(loads: Sequence[NodeLoad]) -> str | None:
            return spread(spec.memory_mb)([n for n in loads if n.node.node_id == node_id])

        return await self._create_placed(spec, placement, fresh, there,
                                         f"the node keeping its volumes ({node_id})")

    async def _create_placed(self, spec: SandboxSpec, placement: Placement,
                             fresh: datetime, choose: Chooser | None = None,
                             where: str = "no node") -> SandboxEndpoint:
        """Placed under the lock first, then made."""
        node_id = await self._store.place(placement, choose or spread(spec.memory_mb), fresh)
        if node_id is None:
            raise NoCapacity(f"{where} can take the sandbox now (none active, or none "
                             f"with {spec.memory_mb} MiB of memory left); try again later")
        self._where[spec.sandbox_id] = node_id
        self._placed(node_id, spec.memory_mb)
        try:
            node = await self._node_of(spec.sandbox_id)
            return await node.create(spec)
        except BaseException:
            await self._unplace(spec.sandbox_id)
            raise

    def _placed(self, node_id: str, memory_mb: int) -> None:
        """This replica's own placements between two refreshes, in its guess."""
        load = self._loads.get(node_id)
        if load is not None:
            self._loads[node_id] = dataclasses.replace(
                load, memory_mb_placed=load.memory_mb_placed + memory_mb,
                sandboxes_placed=load.sandboxes_placed + (1 if memory_mb > 0 else -1))

    async def _unplace(self, object_id: str) -> None:
        self._where.pop(object_id, None)
        await self._store.unplace(object_id)

    async def destroy(self, sandbox_id: str) -> None:
        try:
            node = await self._node_of(sandbox_id)
        except SandboxNotFound:
            return
        await node.destroy(sandbox_id)
        await self._unplace(sandbox_id)

    async def status(self, sandbox_id: str) -> SandboxStatus:
        return await (await self._node_of(sandbox_id)).status(sandbox_id)

    async def endpoint(self, sandbox_id: str) -> SandboxEndpoint:
        return await (await self._node_of(sandbox_id)).endpoint(sandbox_id)

    async def list(self) -> list[str]:
        """The sandboxes placed (on every node, lost ones included: they may still run)
        and those the reachable nodes hold (an unplaced one is an orphan to destroy)."""
        held = {p.object_id: p.node_id for p in await self._store.placements()
                if p.kind is PlacedKind.SANDBOX}
        for node_id, node in list(self._nodes.items()):
            if self._states.get(node_id) is NodeState.LOST:
                continue
            try:
                for sandbox_id in await node.list():
                    held.setdefault(sandbox_id, node_id)
            except NodeUnreachable:
                continue
        self._where.update(held)
        return sorted(held)

    async def usage(self, sandbox_id: str) -> ResourceUsage:
        return await (await self._node_of(sandbox_id)).usage(sandbox_id)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for node in self._nodes.values():
            await node.close()

    # -- Pausable, FleetPausable ---------------------------------------------------------

    async def pause(self, sandbox_id: str) -> None:
        await (await self._node_of(sandbox_id)).pause(sandbox_id)

    async def resume(self, sandbox_id: str) -> SandboxEndpoint:
        return await (await self._node_of(sandbox_id)).resume(sandbox_id)

    async def pause_all(self, sandbox_ids: Sequence[str]) -> dict[str, str]:
        by_node: dict[str, list[str]] = {}
        failed: dict[str, str] = {}
        for sandbox_id in sandbox_ids:
            try:
                by_node.setdefault((await self._node_of(sandbox_id)).node_id,
                                   []).append(sandbox_id)
            except (SandboxNotFound, NodeUnreachable) as exc:
                failed[sandbox_id] = str(exc)
        answers = await asyncio.gather(
            *(self._nodes[n].pause_all(ids) for n, ids in by_node.items()),
            return_exceptions=True)
        for (node_id, ids), answer in zip(by_node.items(), answers, strict=True):
            if isinstance(answer, BaseException):
                failed |= {i: f"node {node_id}: {answer}" for i in ids}
            else:
                failed |= answer
        return failed

    # -- NetworkControl ------------------------------------------------------------------

    async def set_network(self, sandbox_id: str, policy: EgressPolicy) -> None:
        await (await self._node_of(sandbox_id)).set_network(sandbox_id, policy)

    async def network_usage(self, sandbox_id: str) -> NetworkUsage:
        return await (await self._node_of(sandbox_id)).network_usage(sandbox_id)

    # -- Checkpointable ------------------------------------------------------------------

    async def suspend(self, sandbox_id: str, *, memory: bool) -> int:
        return await (await self._node_of(sandbox_id)).suspend(sandbox_id, memory=memory)

    async def wake(self, spec: SandboxSpec, *, memory: bool = True) -> SandboxEndpoint:
        node = await self._node_of(spec.sandbox_id)
        if self._states.get(node.node_id) is NodeState.LOST:
            return await self._move(spec, node.node_id, memory=memory)
        return await node.wake(spec, memory=memory)

    async def _move(self, spec: SandboxSpec, lost: str, *, memory: bool) -> SandboxEndpoint:
        """Wake on another node a suspended sandbox whose node is lost, from the state its
        node exported to the storage nodes share (``TakesOver``). It is placed first
        (only if still on the lost node: one move wins), then taken over; a take-over
        that fails puts the placement back. Its copy on the lost node, should that come
        back, is destroyed then (``_drop_moved``)."""
        fresh = datetime.now(UTC) - timedelta(seconds=self.lost_after_s)
        placement = Placement(spec.sandbox_id, PlacedKind.SANDBOX, "", spec.vcpus,
                              spec.memory_mb)
        node_id = await self._store.place(placement, spread(spec.memory_mb), fresh,
                                          moving_from=lost)
        if node_id is None:
            now = await self._store.placement(spec.sandbox_id)
            self._where.pop(spec.sandbox_id, None)
            if now is None or now.node_id != lost:
                raise NodeUnreachable(f"sandbox {spec.sandbox_id} was moved or removed "
                                      "meanwhile; try again")
            raise NoCapacity(f"sandbox {spec.sandbox_id}'s node {lost} is lost and no other "
                             f"node has {spec.memory_mb} MiB of memory left; try again later")
        self._where[spec.sandbox_id] = node_id
        self._placed(node_id, spec.memory_mb)
        try:
            node = self._nodes.get(node_id)
            if node is None:  # registered since this replica's last refresh
                await self.refresh()
                node = self._nodes.get(node_id)
                if node is None:
                    raise NodeUnreachable(f"node {node_id} is not registered")
            made = await node.take_over(spec, memory=memory)
        except BaseException as exc:
            self._placed(node_id, -spec.memory_mb)
            self._where[spec.sandbox_id] = lost
            await self._store.record_placement(dataclasses.replace(placement, node_id=lost))
            if isinstance(exc, CheckpointNotFound):
                raise NodeUnreachable(
                    f"sandbox {spec.sandbox_id}'s node {lost} is lost and its paused state "
                    "is not on storage the nodes share: it resumes when its node is back"
                ) from exc
            raise
        log.warning("sandbox %s moved from lost node %s to node %s", spec.sandbox_id, lost,
                    node_id)
        self._unreachable.discard(spec.sandbox_id)
        self._tell([spec.sandbox_id], mover=True)
        return made

    def _tell(self, sandbox_ids: Sequence[str], *, mover: bool = False) -> None:
        """Tell the watcher, off the caller's path (it may write events), that the
        sandboxes were moved (by this process when ``mover``)."""
        if self._watcher is None:
            return
        task = asyncio.create_task(self._watcher(sandbox_ids, True, moved=True, mover=mover))
        self._telling.add(task)
        task.add_done_callback(self._telling.discard)

    async def checkpoint(self, sandbox_id: str, checkpoint_id: str, *,
                         memory: bool) -> CheckpointInfo:
        node = await self._node_of(sandbox_id)
        await self._store.record_placement(
            Placement(checkpoint_id, PlacedKind.CHECKPOINT, node.node_id))
        self._where[checkpoint_id] = node.node_id
        try:
            return await node.checkpoint(sandbox_id, checkpoint_id, memory=memory)
        except BaseException:
            await self._unplace(checkpoint_id)
            raise

    async def restore(self, spec: SandboxSpec, checkpoint_id: str) -> SandboxEndpoint:
        return await (await self._node_of(spec.sandbox_id)).restore(spec, checkpoint_id)

    async def create_from(self, spec: SandboxSpec, checkpoint_id: str, *,
                          source_token: str | None) -> SandboxEndpoint:
        """On the node that holds the checkpoint (its files are there)."""
        node = await self._node_of(checkpoint_id, CheckpointNotFound)
        await self._store.record_placement(Placement(
            spec.sandbox_id, PlacedKind.SANDBOX, node.node_id, spec.vcpus, spec.memory_mb))
        self._where[spec.sandbox_id] = node.node_id
        try:
            return await node.create_from(spec, checkpoint_id, source_token=source_token)
        except BaseException:
            await self._unplace(spec.sandbox_id)
            raise

    async def delete_checkpoint(self, checkpoint_id: str) -> None:
        try:
            node = await self._node_of(checkpoint_id, CheckpointNotFound)
        except CheckpointNotFound:
            return
        await node.delete_checkpoint(checkpoint_id)
        await self._unplace(checkpoint_id)

    # -- LayerHolder ---------------------------------------------------------------------

    async def layers_in_use(self) -> frozenset[Path]:
        """What every registered node's sandboxes, build steps and checkpoints mount.
        Fails closed: a node lost or not answering may mount anything, so its silence is
        a ``BackendError`` (no template storage is collected then)."""
        await self.refresh()
        used: set[Path] = set()
        for node_id, node in list(self._nodes.items()):
            if self._states.get(node_id) is NodeState.LOST:
                raise NodeUnreachable(f"node {node_id} is lost: the layers it mounts are "
                                      "unknown")
            used |= await node.layers_in_use()
        return frozenset(used)

    # -- VolumeHost, VolumeRelay: a volume is kept on one node ---------------------------

    async def make_volume(self, volume_id: str, size_mb: int) -> None:
        """On the active node with the most memory left (its sandboxes will run there)."""
        fresh = datetime.now(UTC) - timedelta(seconds=self.lost_after_s)
        node_id = await self._store.place(Placement(volume_id, PlacedKind.VOLUME, ""),
                                          spread(0), fresh)
        if node_id is None:
            raise OSError(errno.EHOSTUNREACH, "no node is active to keep the volume")
        self._where[volume_id] = node_id
        try:
            await (await self._node_of(volume_id)).make_volume(volume_id, size_mb)
        except BaseException:
            await self._unplace(volume_id)
            raise

    async def volume_dir(self, volume_id: str) -> Path:
        """The directory on the node that keeps it (mounted there)."""
        node = await self._node_of(volume_id, _no_volume)
        try:
            return await node.volume_dir(volume_id)
        except NodeUnreachable as exc:
            raise OSError(errno.EHOSTUNREACH, str(exc)) from exc

    async def drop_volume(self, volume_id: str) -> None:
        try:
            node = await self._node_of(volume_id, _no_volume)
        except FileNotFoundError:
            return
        try:
            await node.drop_volume(volume_id)
        except NodeUnreachable as exc:
            raise OSError(errno.EHOSTUNREACH, str(exc)) from exc
        await self._unplace(volume_id)

    async def mount_volumes(self, sandbox_id: str, binds: Sequence[VolumeBind]) -> None:
        node = await self._node_of(sandbox_id)
        for bind in binds:
            kept = await self._store.placement(bind.volume_id)
            if kept is None or kept.node_id != node.node_id:
                raise VolumeMountFailed(f"{bind.path}: its volume is kept on another machine "
                                        "than the sandbox")
        await node.mount_volumes(sandbox_id, binds)

    async def volumes_together(self, volume_ids: Sequence[str]) -> None:
        nodes = set()
        for volume_id in volume_ids:
            kept = await self._store.placement(volume_id)
            if kept is None:
                raise VolumeMountFailed(f"volume {volume_id} is kept on no node")
            nodes.add(kept.node_id)
        if len(nodes) > 1:
            raise VolumeMountFailed("these volumes are kept on different machines, and a "
                                    "sandbox mounts the volumes of one machine only")

    async def relay_volume(self, volume_id: str, method: str, path: str, query: str,
                           headers: Sequence[tuple[str, str]],
                           body: AsyncIterator[bytes]) -> RelayedAnswer:
        node = await self._node_of(volume_id, _no_volume)
        return await node.relay_volume(volume_id, method, path, query, headers, body)

    # -- Builder -----------------------------------------------------------------------

    async def run_build_step(self, step: BuildStep, output: OutputCallback) -> int:
        """On the active node with the most memory left: a step's layers are in the
        template root, which every node must share (docs/scale-out.md, *Templates*)."""
        fresh = datetime.now(UTC) - timedelta(seconds=self.lost_after_s)
        ready = [n for n in self._nodes.values()
                 if self._states.get(n.node_id) is NodeState.ACTIVE
                 and n.record.heartbeat_at >= fresh]
        if not ready:
            raise SandboxSetupError("no node can run the build step now (none active)")
        node = max(ready, key=lambda n: (n.record.memory_mb, n.node_id))
        return await node.run_build_step(step, output)

    # -- Traced, Dialer ------------------------------------------------------------------

    def trace_to(self, sink: TraceSink | None) -> None:
        self._sink = sink
        if sink is not None:
            for node in self._nodes.values():
                node.follow_trace(sink)

    async def dial(self, sandbox_id: str, address: str, port: int) -> socket.socket:
        try:
            node = await self._node_of(sandbox_id)
        except (SandboxNotFound, NodeUnreachable) as exc:
            raise ConnectionRefusedError(str(exc)) from exc
        return await node.dial(sandbox_id, port)
