"""PORT server: buffered aggregation weighted by staleness and update divergence (Su & Li, IWQoS 2022).

The policy decides *when* to aggregate (every ``buffer_size`` arrivals, held back while a running job has
passed the staleness bound) and calls :meth:`PORTServer.flush`; arrivals only fill the buffer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from raysfl.algorithms.common.fl_server import Arrival, FLServer, add_scaled, model_delta


def cosine(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> float | None:
    """Cosine similarity of two flattened deltas; None when either is zero."""
    va = torch.cat([v.to(torch.float64).reshape(-1) for v in a.values()])
    vb = torch.cat([b[k].to(torch.float64).reshape(-1) for k in a])
    na, nb = float(torch.linalg.vector_norm(va)), float(torch.linalg.vector_norm(vb))
    if na == 0 or nb == 0:
        return None
    return float(va @ vb) / (na * nb)


def port_weight(
    num_samples: int,
    total_samples: int,
    similarity: float,
    staleness: int,
    bound: int,
    w_sim: float,
    w_stale: float,
) -> float:
    """Unnormalised weight (|D_i|/Σ|D|)·(ω_sim·(cos + 1)/2 + ω_stale·b/(s + b)) of one buffered update [C].

    Example:
        >>> port_weight(1, 2, 0.0, 10, 10, 1.0, 3.0)  # ½·(½ + 3·½)
        1.0
    """
    return (
        num_samples
        / total_samples
        * (w_sim * (similarity + 1.0) / 2.0 + w_stale * bound / (staleness + bound))
    )


class PORTServer(FLServer):
    """Buffers each arrival with cos_i; :meth:`flush` applies the normalised weighted sum.

    Δ_i = w_i − w_t is taken at the flush, from the model current then (``delta_base = "global"``), or
    Δ_i = w_i − w_{τ_i}, from the arrival's base (``"start"``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.buffer: list[tuple[Arrival, float]] = []
        self.similarity_sum = 0.0

    def _receive(self, arrival: Arrival) -> None:
        """Buffer the arrival with cos(w_i − w_{τ_i}, w_t − w_{τ_i}); a fresh one (no progress): cos 1 [A]."""
        progress = model_delta(self.global_weights, arrival.base)
        sim = cosine(arrival.delta(), progress) if arrival.staleness > 0 else None
        sim = 1.0 if sim is None else sim
        self.similarity_sum += sim
        self.buffer.append((arrival, sim))

    def flush(self) -> None:
        """One global update: w ← w + Σ_i p_i·Δ_i with p_i = raw_i / Σ_j raw_j (:func:`port_weight`)."""
        if not self.buffer:
            raise RuntimeError("invariant broken: PORT asked to aggregate an empty buffer")
        p, now = self.p, self.global_weights
        bound, w_sim, w_stale = p.staleness_bound, p.similarity_weight, p.staleness_weight
        total = sum(a.num_samples for a, _ in self.buffer)
        terms = []
        for a, sim in self.buffer:
            raw = port_weight(a.num_samples, total, sim, a.staleness, bound, w_sim, w_stale)
            terms.append((raw, model_delta(a.weights, now if p.delta_base == "global" else a.base)))
        norm = sum(raw for raw, _ in terms)
        self._commit(add_scaled(now, [(raw / norm, d) for raw, d in terms]))
        self.buffer = []

    def _counters(self) -> dict[str, Any]:
        return {"buffered": len(self.buffer), "mean_similarity": self.similarity_sum / max(self.arrivals, 1)}
