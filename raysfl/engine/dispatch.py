"""Dispatchers carry out a policy's :class:`Call` and :class:`Report` actions.

:class:`LocalDispatcher` runs everything in this process, immediately, in order: the reference for
determinism and the backend of unit tests. :class:`raysfl.engine.ray_backend.RayDispatcher` runs the same
host code in Ray actors and passes ``ObjectRef``s between calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

from raysfl.algorithms.actions import SERVER, Call, Report, Slot
from raysfl.engine.copies import as_sent
from raysfl.engine.hosts import ClientHost, ServerHost
from raysfl.engine.policy_errors import unfilled_slot
from raysfl.engine.provenance import processor_name
from raysfl.engine.snapshot import capture, rebuild

Ready = tuple[dict[str, Any], dict[str, Any]]  # (report info, metrics)


class WorkerLostError(RuntimeError):
    """An actor of the run (a client pool or the server) died; the run can roll back to a checkpoint."""


class WorkerStartError(RuntimeError):
    """An actor of the run raised while it was built: a restart would raise it again, so the run ends.

    Causes: raysfl missing on the actor's node, a method's logic that cannot be built. A user error (exit 2).
    """


def backend_snapshot(server: dict[str, Any], pools: list[dict[str, Any]], slots: dict[Any, Any]) -> dict:
    """The backend part of a checkpoint: server state, each pool's logic, every client state, live slots.

    Client states are stored per client (not per pool), so a run can resume on another number of pools.
    """
    return {
        "server": server,
        "pool_logic": [p["logic"] for p in pools],
        "pool_torch_rng": [p["torch_rng"] for p in pools],
        "clients": {c: tree for p in pools for c, tree in p["states"].items()},
        "slots": capture(slots, root="slots"),
    }


def pool_snapshots(snap: dict[str, Any], n_pools: int, pool_of: Callable[[int], int]) -> list[dict[str, Any]]:
    """Split a checkpoint's client states over ``n_pools`` pools (``pool_of``: the client → pool rule).

    With the checkpoint's pool count each pool gets back its own logic and torch RNG state; with another
    count every pool gets pool 0's (the client logic keeps no per-client state of its own).
    """
    same = len(snap["pool_logic"]) == n_pools
    out = [
        {
            "logic": snap["pool_logic"][i if same else 0],
            "torch_rng": snap["pool_torch_rng"][i if same else 0],
            "states": {},
        }
        for i in range(n_pools)
    ]
    for c, tree in snap["clients"].items():
        out[pool_of(int(c))]["states"][int(c)] = tree
    return out


class Dispatcher(Protocol):
    """What the coordinator needs from an execution backend."""

    def call(self, action: Call) -> None:
        """Start ``action``; its result goes to ``action.out``."""
        ...

    def ready(self, slot: Slot) -> bool:
        """Whether the value of ``slot`` has been computed (realtime mode: has it arrived?)."""
        ...

    def fetch(self, slot: Slot) -> Any:
        """Wait for ``slot``'s (small) value, bring it to the coordinator and free the slot."""
        ...

    def report(self, action: Report) -> None:
        """Deliver ``action.slot``'s value through :meth:`poll` once it is computed."""
        ...

    def poll(self) -> list[Ready]:
        """Reports whose values are ready, in the order they were requested (non-blocking)."""
        ...

    def drain(self) -> list[Ready]:
        """Wait for every outstanding report and return them in order."""
        ...

    def placement(self) -> dict[str, Any]:
        """Where the server and the pools run."""
        ...

    def snapshot(self) -> dict[str, Any]:
        """Checkpoint every actor's state and the live slots (call after :meth:`drain`)."""
        ...

    def restore(self, snap: dict[str, Any]) -> None:
        """Put back what :meth:`snapshot` returned (possibly from a run with another pool count)."""
        ...

    def close(self) -> None:
        """Release the backend's resources."""
        ...


class LocalDispatcher:
    """Runs every call in-process, at once; slots hold copies of the values, as Ray's serialisation makes.

    Each call's arguments and result pass through :func:`as_sent`, so what a logic does in place to a value
    it received or returned stays on its side, as it does between Ray's processes.
    """

    def __init__(self, clients: ClientHost, server: ServerHost, time_scale: float | None = None) -> None:
        self.clients = clients
        self.server = server
        self.time_scale = time_scale
        self.slots: dict[tuple[Any, ...], Any] = {}
        self._ready: list[Ready] = []

    def _resolve(self, arg: Any, use: str = "passed a call") -> Any:
        if not isinstance(arg, Slot):
            return arg
        if arg.name not in self.slots:
            raise unfilled_slot(arg.name, use)
        return self.slots[arg.name]

    def call(self, action: Call) -> None:
        """Execute now."""
        args = as_sent(tuple(self._resolve(a) for a in action.args))
        pace = action.pace_s / self.time_scale if self.time_scale else 0.0
        method = cast(str, action.method)  # Call.__post_init__ keeps a function's name
        if action.target == SERVER:
            value = self.server.call(method, *args, pace_wall_s=pace)
        else:
            value = self.clients.call(method, action.client, *args, pace_wall_s=pace)
        for slot in action.free:
            self.slots.pop(slot.name, None)
        if action.out is not None:
            self.slots[action.out.name] = as_sent(value)

    def ready(self, slot: Slot) -> bool:
        """Values are computed at once."""
        return slot.name in self.slots

    def fetch(self, slot: Slot) -> Any:
        """The value itself; the slot is freed."""
        value = self._resolve(slot, "fetched")
        self.slots.pop(slot.name)
        return value

    def report(self, action: Report) -> None:
        """The value is already there."""
        self._ready.append((action.info, self._resolve(action.slot, "reported")))

    def poll(self) -> list[Ready]:
        """Everything reported so far."""
        out, self._ready = self._ready, []
        return out

    def drain(self) -> list[Ready]:
        """Same as :meth:`poll`: nothing is ever outstanding."""
        return self.poll()

    def placement(self) -> dict[str, Any]:
        """Everything runs in this process; the server on its device."""
        server = self.server
        return {
            "device": server.device,
            "device_name": server.device_name(),
            "node_id": "local",
            "processor": processor_name(),
            "pool_nodes": ["local"],
            "pool_processors": [processor_name()],
        }

    def snapshot(self) -> dict[str, Any]:
        """The server, the single in-process pool and the live slot values."""
        return backend_snapshot(self.server.snapshot(), [self.clients.snapshot()], self.slots)

    def restore(self, snap: dict[str, Any]) -> None:
        """Restore the server, every client and the slots."""
        self.server.restore(snap["server"])
        self.clients.restore(pool_snapshots(snap, 1, lambda c: 0)[0])
        self.slots = rebuild(snap["slots"])

    def close(self) -> None:
        """Nothing to release."""
