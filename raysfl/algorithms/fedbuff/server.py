"""FedBuff server: buffer K_buf client deltas, then one server step (Nguyen et al. 2022, Algorithm 1)."""

from __future__ import annotations

from typing import Any

from raysfl.algorithms.common.aggregate import weighted_average
from raysfl.algorithms.common.fl_server import Arrival, FLServer, add_scaled, staleness_weight
from raysfl.algorithms.common.staleness import canonical_staleness


def buffered_coefficient(server_lr: float, kind: str, staleness: int, a: float, b: float, size: int) -> float:
    """η_g·s(τ)/K_buf: the weight of one buffered Δ_i in w ← w + η_g·(1/K_buf)·Σ s(τ_i)·Δ_i."""
    return server_lr * staleness_weight(canonical_staleness(kind), staleness, a, b) / size


class FedBuffServer(FLServer):
    """Buffered asynchronous aggregation; ``mode = "code"`` averages the buffered models instead."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.buffer: list[tuple[float, Any]] = []

    def _receive(self, arrival: Arrival) -> None:
        """Add Δ_i = w_i − w_{τ_i} (paper) or w_i (code) to the buffer; flush when it holds K_buf."""
        p = self.p
        if p.mode == "paper":
            coef = buffered_coefficient(
                p.server_lr, p.staleness, arrival.staleness, p.staleness_a, p.staleness_b, p.buffer_size
            )
            self.buffer.append((coef, arrival.delta()))
        else:
            self.buffer.append((1.0, arrival.weights))
        if len(self.buffer) == p.buffer_size:
            self._flush()

    def _flush(self) -> None:
        if self.p.mode == "paper":
            self._commit(add_scaled(self.global_weights, self.buffer))
        else:
            self._commit(weighted_average([w for _, w in self.buffer], [c for c, _ in self.buffer]))
        self.buffer = []

    def _counters(self) -> dict[str, Any]:
        return {"buffered": len(self.buffer)}
