"""FedAvg server: collect the round's C models, then w ← Σ_k p_k·w_k (McMahan et al. 2017, Algorithm 1)."""

from __future__ import annotations

from typing import Any

from raysfl.algorithms.common.fl_server import Arrival, FLServer, add_scaled


class FedAvgServer(FLServer):
    """Synchronous rounds: every arrival of a round started from the same global model (staleness 0)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.round_size = self.setup.scenario.federation.active_clients
        self.round: list[Arrival] = []

    def _receive(self, arrival: Arrival) -> None:
        """Buffer the round's models; with the C-th, aggregate (one round = one global iteration)."""
        if arrival.staleness != 0:
            raise RuntimeError(f"invariant broken: FedAvg got a model {arrival.staleness} rounds old")
        self.round.append(arrival)
        if len(self.round) == self.round_size:
            self._commit(aggregate_round(self.global_weights, self.round, self.p.aggregation))
            self.round = []


def aggregate_round(global_weights: Any, arrivals: list[Arrival], aggregation: str) -> dict[str, Any]:
    """FedAvg's w ← Σ_k p_k·w_k over the round, p_k = |D_k| / Σ_j |D_j| ("data-size") or 1/C ("uniform").

    Written in delta form, w + Σ_k p_k·(w_k − w), which equals Σ_k p_k·w_k because Σ_k p_k = 1 and
    every w_k started from w; the sum is taken in float64 in arrival order (:func:`add_scaled`).
    """
    sizes = [float(a.num_samples) if aggregation == "data-size" else 1.0 for a in arrivals]
    total = sum(sizes)
    return add_scaled(global_weights, [(n / total, a.delta()) for n, a in zip(sizes, arrivals, strict=True)])
