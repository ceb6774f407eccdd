"""FedSA server: aggregate every M accepted arrivals; drop those staler than τ₀ (Chen, Mao & Ma 2021)."""

from __future__ import annotations

from typing import Any

from raysfl.algorithms.common.aggregate import weighted_average
from raysfl.algorithms.common.fl_server import Arrival, FLServer, add_scaled


def frequency_lr_scale(client: int, starts: list[int], cap: float) -> float:
    """1/(N·f_i) with f_i = starts_i/Σ_j starts_j and N the devices with a start, capped at ``cap`` [A].

    Equals (mean starts over started devices)/starts_i: a device that trained more often than the average
    gets a smaller learning rate, one that trained less often a larger one (up to ``cap``).

    Example:
        >>> frequency_lr_scale(0, [4, 1, 1, 0], cap=2.0), frequency_lr_scale(1, [4, 1, 1, 0], cap=2.0)
        (0.5, 2.0)
    """
    seen = [s for s in starts if s > 0]
    if starts[client] <= 0:
        raise ValueError(f"client {client} has started no job")
    return min(sum(seen) / (len(seen) * starts[client]), cap)


class FedSAServer(FLServer):
    """Semi-asynchronous buffer of M accepted models."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.buffer: list[Arrival] = []
        self.dropped = 0

    def _receive(self, arrival: Arrival) -> None:
        """Drop an arrival staler than τ₀; otherwise buffer it and aggregate at the M-th."""
        if arrival.staleness > self.p.tau0:
            self.dropped += 1
            return
        self.buffer.append(arrival)
        if len(self.buffer) == self.p.buffer_size:
            sizes = [float(a.num_samples) for a in self.buffer]
            coefs = [s / sum(sizes) for s in sizes]
            if self.p.aggregation == "models":
                self._commit(weighted_average([a.weights for a in self.buffer], coefs))
            else:
                terms = [(c, a.delta()) for c, a in zip(coefs, self.buffer, strict=True)]
                self._commit(add_scaled(self.global_weights, terms))
            self.buffer = []

    def _counters(self) -> dict[str, Any]:
        return {"buffered": len(self.buffer), "dropped": self.dropped}
