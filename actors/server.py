"""The Server actor: the server-side model, buffers and statistics, on a GPU when the cluster has one."""

from __future__ import annotations

from typing import Any

import ray
from raysfl.actors.profiled import Profiled

from raysfl.engine.hosts import ServerHost, pick_device
from raysfl.engine.provenance import processor_name


@ray.remote
class Server(Profiled):
    """Forwards ``call(method, *args)`` to a :class:`ServerHost`; calls run in virtual-time order."""

    def __init__(
        self, setup: Any, test_x: Any, test_y: Any, transform: Any, device: str, threads: int
    ) -> None:
        self.device = pick_device(device)
        self.host = ServerHost(setup, test_x, test_y, transform, self.device, threads)

    @ray.method(num_returns=2)
    def call(self, method: str, *args: Any, pace_wall_s: float = 0.0) -> tuple[Any, None]:
        """Run one server method (``on_activations``, ``on_client_model``, ``evaluate``, ...).

        Returns ``(result, None)``; the ``None`` is the call's status (see :meth:`ClientPool.call`).
        """
        return self.host.call(method, *args, pace_wall_s=pace_wall_s), None

    def snapshot(self) -> dict[str, Any]:
        """Checkpoint: the server logic's state."""
        return self.host.snapshot()

    def restore(self, snap: dict[str, Any]) -> None:
        """Resume from :meth:`snapshot`'s value."""
        self.host.restore(snap)

    def describe(self) -> dict[str, str]:
        """Where the server runs: device name, node and the node's processor model."""
        return {
            "device": self.device,
            "device_name": self.host.device_name(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "processor": processor_name(),
        }
