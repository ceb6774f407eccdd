"""RayDispatcher: runs the policy's calls on ClientPool and Server actors, chaining ObjectRefs.

The coordinator never fetches a tensor: a slot holds the ``ObjectRef`` of the call that produced it, and
a later call receives that ref as an argument, which Ray resolves on the worker that needs the value
(client forward → server → client backward). Only evaluation results (small dicts) come back to the
driver. Each actor runs the calls of its single submitter in submission order, which is virtual-time
order, so the server's state evolves exactly as in :class:`~raysfl.engine.dispatch.LocalDispatcher`.

Backpressure: at most ``max_inflight`` calls are outstanding; past that the dispatcher waits for the oldest,
so the object store never fills however far virtual time runs ahead.

Failures: every actor call returns, beside its result, a tiny status (``None``). The dispatcher fetches the
status of each call once it is done (at the backpressure wait, and at :meth:`RayDispatcher.drain`, which
precedes every checkpoint), never the result. An exception raised by a method's logic in a worker therefore
ends the run, as it does on the local backend, even when nothing ever fetches that call's result; Ray
passes it on to every call that takes the failed result as an argument. The exception keeps its type (a
``ValueError`` raised in ``receive`` is caught as ``ValueError``) and gets a note naming the call.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import ray
from ray.exceptions import ObjectLostError, RayActorError, RayTaskError

from raysfl import profiling
from raysfl.algorithms.actions import SERVER, Call, Report, Slot
from raysfl.engine.balance import PLACEMENTS, LeastLoaded
from raysfl.engine.dispatch import Ready, WorkerLostError, WorkerStartError, backend_snapshot, pool_snapshots
from raysfl.engine.policy_errors import unfilled_slot
from raysfl.engine.snapshot import rebuild

_LOST = (RayActorError, ObjectLostError)


@contextmanager
def _lost_workers() -> Iterator[None]:
    """Turn Ray's "actor died" / "object lost" errors into :class:`WorkerLostError`.

    An actor that raised while it was built is no lost worker: :class:`WorkerStartError`, not retried.
    """
    try:
        yield
    except _LOST as err:
        if isinstance(err, RayActorError) and err.actor_init_failed:
            raise WorkerStartError(start_failure(str(err))) from err
        first_line = str(err).splitlines()[0] if str(err) else ""
        raise WorkerLostError(f"a worker of the run died: {type(err).__name__}: {first_line}") from err


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CREATED_BY = re.compile(r"ray::(\w+)\.__init__\(\)(?: \(pid=\d+, ip=([^,)]+))?")


def start_failure(message: str) -> str:
    """What a worker's failed start says: the exception (Ray's message's last line) and where it was raised.

    ``message`` is Ray's ``ActorDiedError`` text for an actor whose creation task raised; its first line names
    the actor class and its node (``ray::ClientPool.__init__() (pid=7, ip=10.0.0.3, ...)``).
    """
    message = _ANSI.sub("", message)  # Ray colours the actor's name
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    what = lines[-1] if lines else "an unknown error"
    found = _CREATED_BY.search(message)
    where = ""
    if found:
        node = f" on node {found.group(2)}" if found.group(2) else ""
        where = f" (raised building {found.group(1)}{node})"
    return (
        f"a worker of the run could not start: {what}{where}. Every node needs raysfl and its dependencies, "
        "the versions installed here; a method whose logic cannot be built fails here too (its traceback is "
        "in Ray's log above). Nothing was retried."
    )


def describe_call(action: Call) -> str:
    """``the server's call receive`` or ``client 3's call train``: a call, as an error message names it."""
    who = "the server's" if action.target == SERVER else f"client {action.client}'s"
    return f"{who} call {action.method}"


@contextmanager
def _failed_in_worker(source: Call | dict[str, Any]) -> Iterator[None]:
    """Add a note naming ``source`` (a call, or a report's tags) to an exception raised in a Ray worker.

    Ray raises it as a ``RayTaskError`` that is also an instance of the original exception's class, with
    the worker's traceback in its message. A lost worker is left to :func:`_lost_workers`.
    """
    try:
        yield
    except RayTaskError as err:
        if not isinstance(err, _LOST):
            what = describe_call(source) if isinstance(source, Call) else _report_of(source)
            err.add_note(f"raysfl: raised by {what}, in a Ray worker (its traceback is above)")
        raise


class RayDispatcher:
    """Dispatches to Ray actors: client calls to a pool, the rest to ``server``.

    A client's pool is ``pool_of(client)``; with ``placement = "least-loaded"`` and a client logic whose
    clients roam, each call goes to the pool with the fewest calls in flight and carries the client's
    state (:mod:`raysfl.engine.balance`).
    """

    def __init__(
        self,
        pools: list[Any],
        pool_of: Callable[[int], int],
        server: Any,
        max_inflight: int,
        time_scale: float | None = None,
        placement: str = "blocks",
        reservation: Any = None,
    ) -> None:
        if placement not in PLACEMENTS:
            raise ValueError(f"engine.placement must be one of {PLACEMENTS}, got {placement!r}")
        self.time_scale = time_scale
        self.reservation = reservation  # the run's own placement group (None: in a sweep trial's)
        self.pools = pools
        self.pool_of = pool_of
        self.balancer: LeastLoaded | None = None
        self.pool_placement = "blocks"
        self.carried: dict[int, ray.ObjectRef] = {}  # roaming client -> its state, as its last call left it
        self._last_pool: dict[int, int] = {}
        if placement == "least-loaded" and len(pools) > 1:
            with _lost_workers():  # a fresh pool can die at once (its node was lost and is not yet marked)
                roam = ray.get(pools[0].clients_roam.remote())
            if roam:
                self.balancer = LeastLoaded(len(pools), _finished)
                self.pool_placement = "least-loaded"
            else:
                self.pool_placement = "blocks (the method's client calls are not whole jobs)"
        self.server = server
        self.max_inflight = max_inflight
        self.slots: dict[tuple[Any, ...], ray.ObjectRef] = {}
        self._inflight: deque[tuple[ray.ObjectRef, Call]] = deque()  # (status, call), oldest first
        self._reports: deque[tuple[dict[str, Any], ray.ObjectRef]] = deque()
        self.peak_inflight = 0
        if profiling.enabled():  # the profile scripts: every actor profiles itself too
            lanes = [("server", server), *((f"pool{i}", p) for i, p in enumerate(pools))]
            ray.get([actor.profile.remote("start", lane) for lane, actor in lanes])

    def _resolve(self, arg: Any, use: str = "passed a call") -> Any:
        if isinstance(arg, Slot):
            ref = self.slots.get(arg.name)
            if ref is None:
                raise unfilled_slot(arg.name, use)
            return ref
        return arg

    def call(self, action: Call) -> None:
        """Submit the actor call; store its ref in ``action.out``."""
        args = [self._resolve(a) for a in action.args]
        pace = action.pace_s / self.time_scale if self.time_scale else 0.0
        with profiling.section("ray.submit"):
            if action.target == SERVER:
                ref, status = self.server.call.remote(action.method, *args, pace_wall_s=pace)
            elif self.balancer is not None:
                ref, status = self._call_roaming(action, args, pace)
            else:
                pool = self.pools[self.pool_of(action.client)]
                ref, status = pool.call.remote(action.method, action.client, *args, pace_wall_s=pace)
        for slot in action.free:
            self.slots.pop(slot.name, None)
        if action.out is not None:
            self.slots[action.out.name] = ref
        self._inflight.append((status, action))
        self.peak_inflight = max(self.peak_inflight, len(self._inflight))
        while len(self._inflight) > self.max_inflight:
            with profiling.section("ray.backpressure_wait"):
                self._check(*self._inflight.popleft())

    @staticmethod
    def _check(status: ray.ObjectRef, action: Call) -> None:
        """Wait for ``action``'s call to finish; raise what its method raised (its result is not fetched)."""
        with _lost_workers(), _failed_in_worker(action):
            ray.get(status)

    def _call_roaming(
        self, action: Call, args: list[Any], pace: float
    ) -> tuple[ray.ObjectRef, ray.ObjectRef]:
        """Submit a roaming client's call, with its state, to the least-loaded pool; its result and status.

        The state the call returns replaces the client's in :attr:`carried`.
        """
        assert self.balancer is not None
        client = action.client
        index = self.balancer.pick(self._last_pool.get(client))
        ref, state, status = self.pools[index].call_carried.remote(
            action.method, client, self.carried.get(client), *args, pace_wall_s=pace
        )
        self.carried[client] = state
        self._last_pool[client] = index
        self.balancer.submitted(index, ref)
        return ref, status

    def ready(self, slot: Slot) -> bool:
        """Whether the call producing ``slot`` has finished (without fetching its value)."""
        ready, _ = ray.wait([self._resolve(slot, "awaited")], timeout=0, fetch_local=False)
        return bool(ready)

    def fetch(self, slot: Slot) -> Any:
        """``ray.get`` the slot's value (a synchronisation point with the worker producing it); free it."""
        ref = self._resolve(slot, "fetched")
        with _lost_workers(), profiling.section("ray.fetch"):
            value = ray.get(ref)
        self.slots.pop(slot.name, None)
        return value

    def report(self, action: Report) -> None:
        """Remember the slot's ref; its value is fetched by :meth:`poll` / :meth:`drain`."""
        self._reports.append((action.info, self._resolve(action.slot, "reported")))

    def poll(self) -> list[Ready]:
        """Fetch the reports at the head of the queue that are ready (keeps their order)."""
        out: list[Ready] = []
        while self._reports:
            info, ref = self._reports[0]
            ready, _ = ray.wait([ref], timeout=0)
            if not ready:
                break
            self._reports.popleft()
            with _lost_workers(), _failed_in_worker(info), profiling.section("ray.fetch"):
                out.append((info, ray.get(ref)))
        return out

    def drain(self) -> list[Ready]:
        """Wait for every outstanding report and call; fail with :class:`WorkerLostError` if an actor died."""
        with profiling.section("ray.drain"):
            while self._inflight:  # oldest first: the first failure in submission order is raised
                self._check(*self._inflight.popleft())
            out = []
            for info, ref in self._reports:
                with _lost_workers(), _failed_in_worker(info):
                    out.append((info, ray.get(ref)))
            self._reports.clear()
            with _lost_workers():
                ray.get([p.pid.remote() for p in self.pools])  # a pool that died after its last call
        return out

    def snapshot(self) -> dict[str, Any]:
        """Every pool's and the server's state, and the live slot values (fetched once, here)."""
        with _lost_workers():
            pools = ray.get([p.snapshot.remote() for p in self.pools])
            server = ray.get(self.server.snapshot.remote())
            names = list(self.slots)
            values = ray.get([self.slots[n] for n in names])
            roaming = list(self.carried)
            states = ray.get([self.carried[c] for c in roaming])
        snap = backend_snapshot(server, pools, dict(zip(names, values, strict=True)))
        snap["clients"].update(zip(roaming, states, strict=True))
        return snap

    def restore(self, snap: dict[str, Any]) -> None:
        """Send each pool its clients' states, the server its state; re-put the live slot values."""
        parts = pool_snapshots(snap, len(self.pools), self.pool_of)
        if self.balancer is not None:  # the states wait in the object store, the pools hold none
            self.carried = {int(c): ray.put(tree) for c, tree in snap["clients"].items()}
            self._last_pool.clear()
            self.balancer.reset()
            for part in parts:
                part["states"] = {}
        with _lost_workers():
            ray.get([p.restore.remote(part) for p, part in zip(self.pools, parts, strict=True)])
            ray.get(self.server.restore.remote(snap["server"]))
        self.slots = {name: ray.put(value) for name, value in rebuild(snap["slots"]).items()}

    def kill_pool(self, index: int) -> int:
        """Fault injection: SIGKILL pool ``index``'s process (``ray.kill`` when it runs on another node)."""
        pid, node = ray.get([self.pools[index].pid.remote(), self.pools[index].node_id.remote()])
        if node == ray.get_runtime_context().get_node_id():
            os.kill(pid, signal.SIGKILL)
        else:
            ray.kill(self.pools[index], no_restart=True)
        return pid

    def placement(self) -> dict[str, Any]:
        """Where the actors run: the server's device and node, each pool's node, how clients are placed.

        With least-loaded placement also the calls each pool was given and how often a client's call went
        to another pool than its previous one.
        """
        nodes_asked = [p.node_id.remote() for p in self.pools]
        processors_asked = [p.processor.remote() for p in self.pools]
        with _lost_workers():  # one wait for every answer
            server, *answers = ray.get([self.server.describe.remote(), *nodes_asked, *processors_asked])
        nodes, processors = answers[: len(nodes_asked)], answers[len(nodes_asked) :]
        out = {
            **server,
            "pool_nodes": nodes,
            "pool_processors": processors,
            "pool_placement": self.pool_placement,
        }
        if self.balancer is not None:
            out["pool_calls"] = list(self.balancer.calls)
            out["client_moves"] = self.balancer.moves
        return out

    def collect_profiles(self) -> None:
        """Profiling only: add every actor's report to this process's profiler.

        Each report gets its worker's Ray task phases (argument deserialisation, execution, result
        storing) from ``ray.timeline()``.
        """
        prof = profiling.ACTIVE
        if prof is None:
            return
        with suppress(*_LOST), profiling.section("profiling.collect"):
            lanes = [self.server, *self.pools]
            reports = [r for r in ray.get([a.profile.remote("report") for a in lanes]) if r is not None]
            time.sleep(TASK_EVENT_FLUSH_S)  # workers report task events to the GCS about once a second
            events = ray.timeline()
            for r in reports:  # the tasks since the actor started profiling
                r["ray_phases"] = task_phases(events, r["worker_id"], r["t0_epoch_s"])
            prof.lanes.extend(reports)

    def close(self) -> None:
        """Kill the actors of this run (profiling: after collecting their profiles)."""
        if profiling.enabled():
            self.collect_profiles()
        for actor in [*self.pools, self.server]:
            with suppress(*_LOST):  # already dead
                ray.kill(actor)
        if self.reservation is not None:
            remove_reservation(self.reservation)


def remove_reservation(pg: Any) -> None:
    """Give a run's placement group back (its actors end with it); nothing if it is already gone."""
    from ray.util.placement_group import remove_placement_group

    with suppress(Exception):  # already removed, or the cluster is gone
        remove_placement_group(pg)


TASK_EVENT_FLUSH_S = 2.0


def _report_of(info: dict[str, Any]) -> str:
    """The call behind a report, as an error message names it (its tags: ``iteration``, ``t``, ...)."""
    tags = ", ".join(f"{k}={v}" for k, v in info.items() if k in ("iteration", "t", "kind"))
    return f"the call whose value a report ({tags}) reads"


def _finished(ref: ray.ObjectRef) -> bool:
    """Whether the call behind ``ref`` has finished (does not wait, fetches nothing)."""
    ready, _ = ray.wait([ref], timeout=0, fetch_local=False)
    return bool(ready)


def task_phases(
    events: list[dict[str, Any]], worker_id: str, since_epoch_s: float = 0.0
) -> dict[str, dict[str, float]]:
    """Calls and total seconds of each ``task:*`` phase of Ray worker ``worker_id`` in a timeline.

    Only tasks that started at or after ``since_epoch_s`` (Unix seconds) count; ``events`` is what
    ``ray.timeline()`` returns (times in microseconds).
    """
    out: dict[str, dict[str, float]] = {}
    for ev in events:
        cat = str(ev.get("cat", ""))
        if not cat.startswith("task:") or ev.get("tid") != f"worker:{worker_id}":
            continue
        if float(ev.get("ts", 0.0)) / 1e6 < since_epoch_s:
            continue
        row = out.setdefault(cat, {"calls": 0, "s": 0.0})
        row["calls"] += 1
        row["s"] += float(ev.get("dur", 0.0)) / 1e6
    return out
