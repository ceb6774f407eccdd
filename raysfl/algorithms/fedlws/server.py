"""FedLWS server: FedAvg's round average, then adaptive layer-wise weight shrinking (Shi et al., ICLR 2025).

A *layer* is one module's trainable tensors together (``conv1.weight`` and ``conv1.bias``) [A]; the
authors' code cuts the flattened state dict after every ``bias`` tensor, which is the same grouping for
models whose layers all have a bias. Buffers (BatchNorm statistics) are averaged and not shrunk [A].
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from raysfl.algorithms.common.fl_server import Arrival, FLServer, _cast


def layer_groups(keys: Sequence[str]) -> dict[str, list[str]]:
    """Trainable tensor names grouped by their module (the name without its last component), in order."""
    groups: dict[str, list[str]] = {}
    for key in keys:
        groups.setdefault(key.rsplit(".", 1)[0], []).append(key)
    return groups


def _flat(tensors: Mapping[str, torch.Tensor], keys: Sequence[str]) -> torch.Tensor:
    return torch.cat([tensors[k].detach().to(torch.float64).reshape(-1) for k in keys])


def shrink_factors(
    global_weights: Mapping[str, torch.Tensor],
    deltas: Sequence[Mapping[str, torch.Tensor]],
    coefs: Sequence[float],
    groups: Mapping[str, Sequence[str]],
    beta: float,
    tau_min: float,
    tau_max: float,
) -> dict[str, float]:
    """γ_l per layer (FedLWS: γ_l = ‖w_l‖ / (β·τ_l·‖g_l‖ + ‖w_l‖)).

    With Δ_k = w_k − w the clients' updates, g_l = Σ_k p_k·Δ_{k,l} the aggregated update of layer l,
    τ_l = (1/n)·Σ_k ‖Δ_{k,l} − (1/n)·Σ_j Δ_{j,l}‖ the clients' spread [C], and β·τ_l clamped to
    [``tau_min``, ``tau_max``] [C]. A layer with ‖w_l‖ = 0 and g_l = 0 keeps γ_l = 1 [A].
    """
    out: dict[str, float] = {}
    n = float(len(deltas))
    for name, keys in groups.items():
        w = _flat(global_weights, keys)
        ds = [_flat(d, keys) for d in deltas]
        g = sum(c * d for c, d in zip(coefs, ds, strict=True))
        mean = sum(ds) / n
        spread = sum(float(torch.linalg.vector_norm(d - mean)) for d in ds) / n
        tau = min(max(beta * spread, tau_min), tau_max)
        w_norm, g_norm = float(torch.linalg.vector_norm(w)), float(torch.linalg.vector_norm(g))
        denom = w_norm + tau * g_norm
        out[name] = 1.0 if denom == 0 else w_norm / denom
    return out


def fedlws_step(
    global_weights: Mapping[str, torch.Tensor],
    deltas: Sequence[Mapping[str, torch.Tensor]],
    coefs: Sequence[float],
    groups: Mapping[str, Sequence[str]],
    gammas: Mapping[str, float],
) -> dict[str, torch.Tensor]:
    """w_l^{t+1} = γ_l·(w_l + Σ_k p_k·Δ_{k,l}) for every layer; other entries get the plain average."""
    scale = {key: gammas[name] for name, keys in groups.items() for key in keys}
    out: dict[str, torch.Tensor] = {}
    for key, ref in global_weights.items():
        acc = ref.detach().to(torch.float64).clone()
        for c, d in zip(coefs, deltas, strict=True):
            acc += float(c) * d[key].to(torch.float64)
        out[key] = _cast(acc * scale.get(key, 1.0), ref)
    return out


class FedLWSServer(FLServer):
    """Synchronous rounds of C devices; each round's average is shrunk layer by layer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.round_size = self.setup.scenario.federation.active_clients
        self.round: list[Arrival] = []
        self.groups = layer_groups([k for k, _ in self.full.named_parameters()])
        self.last_gammas: dict[str, float] = {}

    def _receive(self, arrival: Arrival) -> None:
        """Buffer the round's models; with the C-th, aggregate and shrink."""
        if arrival.staleness != 0:
            raise RuntimeError(f"invariant broken: FedLWS got a model {arrival.staleness} rounds old")
        self.round.append(arrival)
        if len(self.round) < self.round_size:
            return
        sizes = [float(a.num_samples) if self.p.aggregation == "data-size" else 1.0 for a in self.round]
        coefs = [s / sum(sizes) for s in sizes]
        deltas = [a.delta() for a in self.round]
        p = self.p
        self.last_gammas = shrink_factors(
            self.global_weights, deltas, coefs, self.groups, p.beta, p.tau_min, p.tau_max
        )
        self._commit(fedlws_step(self.global_weights, deltas, coefs, self.groups, self.last_gammas))
        self.round = []

    def _counters(self) -> dict[str, Any]:
        g = list(self.last_gammas.values())
        return {"mean_gamma": sum(g) / len(g) if g else 1.0, "min_gamma": min(g) if g else 1.0}
