"""FedAsync server: mix each arriving model into the global one (Xie et al. 2019, Algorithm 1)."""

from __future__ import annotations

from typing import Any

from raysfl.algorithms.common.fl_server import Arrival, FLServer, mix_models, staleness_weight


def mixing_weight(alpha: float, kind: str, staleness: int, a: float, b: float) -> float:
    """α_t = α·s(t − τ) (Xie et al. 2019, §5.2, "adaptive α")."""
    return alpha * staleness_weight(kind, staleness, a, b)


class FedAsyncServer(FLServer):
    """One global update per arrival: x_t = (1 − α_t)·x_{t−1} + α_t·x_new."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.alpha_sum = 0.0

    def _receive(self, arrival: Arrival) -> None:
        """Mix w_k in with α_t = α·s(staleness + ``staleness_offset``).

        The staleness is the number of global versions since its base was sent (0 when fresh).
        """
        p = self.p
        lag = arrival.staleness + p.staleness_offset
        alpha_t = mixing_weight(p.alpha, p.staleness, lag, p.staleness_a, p.staleness_b)
        self.alpha_sum += alpha_t
        self._commit(mix_models(self.global_weights, arrival.weights, alpha_t))

    def _counters(self) -> dict[str, Any]:
        return {"mean_alpha": self.alpha_sum / max(self.arrivals, 1)}
