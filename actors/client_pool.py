"""The ClientPool actor: one OS process hosting many virtual clients (docs/architecture.md, "A run")."""

from __future__ import annotations

import os
from typing import Any

import ray
from raysfl.actors.profiled import Profiled

from raysfl.engine.hosts import ClientHost
from raysfl.engine.provenance import processor_name


@ray.remote
class ClientPool(Profiled):
    """Forwards ``call(method, client, *args)`` to a :class:`ClientHost`; holds no logic of its own.

    Calls from the coordinator run in submission order (Ray's guarantee for one submitter), so each
    virtual client sees its forward/backward steps in virtual-time order.
    """

    def __init__(self, setup: Any, train_x: Any, train_y: Any, transform: Any, threads: int = 1) -> None:
        self.host = ClientHost(setup, train_x, train_y, transform, threads)

    @ray.method(num_returns=2)
    def call(self, method: str, client: int, *args: Any, pace_wall_s: float = 0.0) -> tuple[Any, None]:
        """Run one client step (``start``, ``step``, ``finish``, ...), paced in realtime mode.

        Returns ``(result, None)``: the ``None`` is the call's status, which the dispatcher fetches to learn
        of a failure without fetching the result (:mod:`raysfl.engine.ray_backend`).
        """
        return self.host.call(method, client, *args, pace_wall_s=pace_wall_s), None

    @ray.method(num_returns=3)
    def call_carried(
        self, method: str, client: int, state: Any, *args: Any, pace_wall_s: float = 0.0
    ) -> tuple[Any, Any, None]:
        """Run one call of a roaming client: its ``state`` comes in, ``(result, state, status)`` go out."""
        return *self.host.call_carried(method, client, state, *args, pace_wall_s=pace_wall_s), None

    def clients_roam(self) -> bool:
        """Whether the client logic's calls are whole jobs, so its clients may run in any pool."""
        return self.host.clients_roam()

    def snapshot(self) -> dict[str, Any]:
        """Checkpoint: the pool's logic and its clients' states (plain data and tensors)."""
        return self.host.snapshot()

    def restore(self, snap: dict[str, Any], logic: bool = True) -> None:
        """Resume: restore what :meth:`snapshot` returned (``snap["states"]``: this pool's clients)."""
        self.host.restore(snap, logic)

    def pid(self) -> int:
        """The pool's OS process id (fault-injection and diagnostics)."""
        return os.getpid()

    def node_id(self) -> str:
        """The Ray node this pool runs on (placement tests, reports)."""
        return ray.get_runtime_context().get_node_id()

    def processor(self) -> str:
        """The processor model of this pool's node: it decides the last bits of the pool's jobs."""
        return processor_name()
