"""FedDyn's device objective (Acar et al., ICLR 2021, Algorithm 1, lines 6-7)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from raysfl.algorithms.common.fl_client import FLClientState


class FedDynObjective:
    """L_k(θ) − ⟨∇L_k(θ_k^{t−1}), θ⟩ + α/2·‖θ − θ^{t−1}‖² with the device's state ∇L_k kept between jobs.

    ``state.memory["grad"]`` holds ∇L_k(θ_k^{t−1}), one tensor per trainable parameter, 0 before the
    device's first job (Algorithm 1, initialisation). After a job it becomes
    ∇L_k(θ_k^t) = ∇L_k(θ_k^{t−1}) − α·(θ_k^t − θ^{t−1}) (line 7), the first-order condition of the
    local problem.
    """

    def __init__(self, alpha: float) -> None:
        self.alpha = float(alpha)
        self.anchor: list[torch.Tensor] = []

    def begin(self, state: FLClientState, model: nn.Module, params: Sequence[torch.Tensor]) -> None:
        """Remember θ^{t−1} (the received model) and create the zero gradient state on first use."""
        self.anchor = [p.detach().clone() for p in params]
        if "grad" not in state.memory:
            state.memory["grad"] = [torch.zeros_like(p) for p in self.anchor]

    def loss(
        self,
        state: FLClientState,
        model: nn.Module,
        params: Sequence[torch.Tensor],
        x: torch.Tensor,
        y: torch.Tensor,
    ) -> torch.Tensor:
        """Cross-entropy − Σ⟨g_k, θ⟩ + α/2·Σ‖θ − θ^{t−1}‖² on one minibatch."""
        loss = F.cross_entropy(model(x), y)
        for p, g, a in zip(params, state.memory["grad"], self.anchor, strict=True):
            loss = loss - (g * p).sum() + 0.5 * self.alpha * ((p - a) ** 2).sum()
        return loss

    def end(self, state: FLClientState, model: nn.Module, params: Sequence[torch.Tensor]) -> None:
        """∇L_k(θ_k^t) = ∇L_k(θ_k^{t−1}) − α·(θ_k^t − θ^{t−1})."""
        state.memory["grad"] = [
            g - self.alpha * (p.detach() - a)
            for g, p, a in zip(state.memory["grad"], params, self.anchor, strict=True)
        ]
