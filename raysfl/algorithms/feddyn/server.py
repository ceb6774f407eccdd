"""FedDyn server: the round's average corrected by the server state h (Acar et al. 2021, Algorithm 1)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import torch

from raysfl.algorithms.common.fl_server import Arrival, Delta, FLServer, _cast, zeros_delta


def feddyn_step(
    global_weights: Mapping[str, torch.Tensor],
    h: Delta,
    deltas: Sequence[Mapping[str, torch.Tensor]],
    alpha: float,
    num_clients: int,
    param_keys: set[str],
) -> tuple[dict[str, torch.Tensor], Delta]:
    """One FedDyn server step; returns (θ^t, h^t).

    h^t = h^{t−1} − α·(1/m)·Σ_k Δ_k and θ^t = θ^{t−1} + (1/|P|)·Σ_k Δ_k − h^t/α with Δ_k = θ_k^t − θ^{t−1}
    and m = ``num_clients`` (Algorithm 1, lines 9-10, written in delta form). Entries not in
    ``param_keys`` (buffers such as BatchNorm statistics) get the plain average θ^{t−1} + mean Δ [A].
    Float64 arithmetic, cast back to each tensor's dtype.
    """
    n = float(len(deltas))
    new_h: Delta = {}
    out: dict[str, torch.Tensor] = {}
    for key, ref in global_weights.items():
        total = torch.zeros(ref.shape, dtype=torch.float64)
        for d in deltas:
            total += d[key].to(torch.float64)
        value = ref.detach().to(torch.float64) + total / n
        if key in param_keys:
            new_h[key] = h[key] - alpha * total / num_clients
            value = value - new_h[key] / alpha
        out[key] = _cast(value, ref)
    return out, new_h


class FedDynServer(FLServer):
    """Synchronous rounds of C devices; h starts at 0 (Algorithm 1, initialisation)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.round_size = self.setup.scenario.federation.active_clients
        self.round: list[Arrival] = []
        self.param_keys = {k for k, _ in self.full.named_parameters()}
        self.h: Delta = {k: v for k, v in zeros_delta(self.global_weights).items() if k in self.param_keys}

    def _receive(self, arrival: Arrival) -> None:
        """Buffer the round's models; with the C-th, take the FedDyn step."""
        if arrival.staleness != 0:
            raise RuntimeError(f"invariant broken: FedDyn got a model {arrival.staleness} rounds old")
        self.round.append(arrival)
        if len(self.round) == self.round_size:
            weights, self.h = feddyn_step(
                self.global_weights,
                self.h,
                [a.delta() for a in self.round],
                self.p.alpha,
                self.setup.num_clients,
                self.param_keys,
            )
            self._commit(weights)
            self.round = []

    def _counters(self) -> dict[str, Any]:
        return {"h_norm": float(torch.sqrt(cast(torch.Tensor, sum((v**2).sum() for v in self.h.values()))))}
