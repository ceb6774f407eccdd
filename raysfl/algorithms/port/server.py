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
    """Buffers (update, |D_i|, cos_i, s_i); :meth:`flush` applies the normalised weighted sum.

    The buffered update is the model w_i (``delta_base = "global"``: Δ_i = w_i − w_t is taken at the flush,
    from the model current then) or Δ_i = w_i − w_{τ_i} (``"start"``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.buffer: list[tuple[Any, int, float, int]] = []
        self.similarity_sum = 0.0

    def _receive(self, arrival: Arrival) -> None:
        """Buffer the update with cos(w_i − w_{τ_i}, w_t − w_{τ_i}); a fresh one (no progress): cos 1 [A]."""
        delta = arrival.delta()
        progress = model_delta(self.global_weights, arrival.base)
        sim = cosine(delta, progress) if arrival.staleness > 0 else None
        sim = 1.0 if sim is None else sim
        self.similarity_sum += sim
        update = delta if self.p.delta_base == "start" else dict(arrival.weights)
        self.buffer.append((update, arrival.num_samples, sim, arrival.staleness))

    def flush(self) -> None:
        """One global update: w ← w + Σ_i p_i·Δ_i with p_i = raw_i / Σ_j raw_j (:func:`port_weight`)."""
        if not self.buffer:
            raise RuntimeError("invariant broken: PORT asked to aggregate an empty buffer")
        p = self.p
        total = sum(n for _, n, _, _ in self.buffer)
        raw = [
            port_weight(n, total, sim, s, p.staleness_bound, p.similarity_weight, p.staleness_weight)
            for _, n, sim, s in self.buffer
        ]
        deltas = [
            u if p.delta_base == "start" else model_delta(u, self.global_weights) for u, *_ in self.buffer
        ]
        self._commit(
            add_scaled(self.global_weights, [(r / sum(raw), d) for r, d in zip(raw, deltas, strict=True)])
        )
        self.buffer = []

    def _counters(self) -> dict[str, Any]:
        return {"buffered": len(self.buffer), "mean_similarity": self.similarity_sum / max(self.arrivals, 1)}
