"""ASO-Fed server: each arrival applied at once with its decayed correction (Chen et al., BigData 2020).

The per-device history (s_k^prev, h_k) is a deterministic function of the device's own uploads, so it is
kept on the server, which receives every upload anyway; the device would compute exactly the same ζ_k
and send a model-sized vector either way [A]. Optional (``feature_attention = "softmax"``): the paper's
server-side feature representation learning as a third-party re-implementation reads it,
W1 ← W1 ⊙ softmax(W1) on the first weight tensor after every global update [R]; its exact form could not be
checked against the paper (see the docs page). The dynamic local step size is the policy's
(:mod:`raysfl.algorithms.aso_fed.policy`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from raysfl.algorithms.common.fl_server import Arrival, Delta, FLServer, Weights, add_scaled, zeros_delta


def corrected_update(
    s: Mapping[str, torch.Tensor], s_prev: Delta, h_prev: Delta, beta: float
) -> tuple[Delta, Delta]:
    """(ζ_k, h_k): ζ_k = s_k − s_k^prev + h_k^prev and h_k = β·h_k^prev + (1 − β)·s_k^prev (ASO-Fed).

    Example:
        >>> z, h = corrected_update({"a": torch.tensor([3.0])}, {"a": torch.tensor([1.0])},
        ...                         {"a": torch.tensor([0.5])}, 0.5)
        >>> z["a"].item(), h["a"].item()
        (2.5, 0.75)
    """
    zeta = {k: s[k].to(torch.float64) - s_prev[k] + h_prev[k] for k in s}
    h = {k: beta * h_prev[k] + (1.0 - beta) * s_prev[k] for k in s}
    return zeta, h


def first_weight_key(weights: Mapping[str, torch.Tensor]) -> str:
    """The first floating tensor with at least 2 dimensions in state-dict order: the first layer's weight."""
    for key, value in weights.items():
        if value.is_floating_point() and value.dim() >= 2:
            return key
    raise ValueError("the model has no weight tensor with 2 or more dimensions")


def feature_attention(weights: Mapping[str, torch.Tensor]) -> Weights:
    """W1 ← W1 ⊙ softmax(W1) on the first weight tensor, softmax per output unit over its inputs [R].

    ASO-Fed's server-side feature representation learning (Chen et al. 2020, Sec. 4.1) as a third-party
    re-implementation reads it: a conv weight (out, in, kh, kw) is flattened to (out, in·kh·kw). Computed in
    float64 and cast back; every other tensor (biases included) is returned unchanged (same objects).

    Example:
        >>> feature_attention({"w": torch.tensor([[1.0, 1.0], [0.0, 0.0]])})["w"]
        tensor([[0.5000, 0.5000],
                [0.0000, 0.0000]])
    """
    key = first_weight_key(weights)
    ref = weights[key]
    w = ref.detach().to(torch.float64).reshape(ref.shape[0], -1)
    out = dict(weights)
    out[key] = (w * torch.softmax(w, dim=1)).reshape(ref.shape).to(ref.dtype)
    return out


class ASOFedServer(FLServer):
    """One global update per arrival: w ← w − (|D_k|/n)·ζ_k, then optionally the first-layer re-weighting."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.total_samples = sum(self.setup.client_size(i) for i in range(self.setup.num_clients))
        self.history: dict[int, tuple[Delta, Delta]] = {}  # k -> (s_k^prev, h_k)

    def _receive(self, arrival: Arrival) -> None:
        """s_k = w_{τ_k} − w_k; correct it with the device's history; step by |D_k|/n; re-weight W1."""
        s = {k: -v for k, v in arrival.delta().items()}
        s_prev, h_prev = self.history.get(arrival.client) or (
            zeros_delta(self.global_weights),
            zeros_delta(self.global_weights),
        )
        zeta, h = corrected_update(s, s_prev, h_prev, self.p.beta)
        self.history[arrival.client] = (s, h)
        new = add_scaled(self.global_weights, [(-arrival.num_samples / self.total_samples, zeta)])
        if self.p.feature_attention == "softmax":
            new = feature_attention(new)
        self._commit(new)

    def _counters(self) -> dict[str, Any]:
        return {"devices_seen": len(self.history)}
