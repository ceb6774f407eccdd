"""MOON's device objective: cross-entropy plus the model-contrastive loss (Li et al., CVPR 2021, eqs. 1-3).

The representation z is the input of the model's last layer (its penultimate features), taken before any
dropout right in front of that layer [A]: MOON's networks carry a projection head (a 2-layer MLP, output
256) that our model zoo does not have, and adding one would change the model every baseline trains. Dropout
is left out of z because the local model trains in train mode while the global and previous ones are frozen
in eval mode: a dropped-out z would be compared with whole ones (cos ≈ 0.6 for identical weights). A device
with no previous local model (its first round) trains on the cross-entropy alone [A]; MOON's code then uses
the global model as the previous one, which makes both similarities equal and the contrastive term's
gradient exactly zero, so the two readings train the same.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from raysfl.algorithms.common.fl_client import FLClientState


def layers_of(model: nn.Module) -> list[nn.Module]:
    """The model's modules in forward order, nested ``nn.Sequential`` containers flattened."""
    if isinstance(model, nn.Sequential):
        return [m for child in model for m in layers_of(child)]
    return [model]


def representation_and_logits(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(z, logits): z the last layer's input before any dropout in front of it (flattened), logits the output.

    The logits go through that dropout, as in the model's own forward.
    """
    layers = layers_of(model)
    tail = len(layers) - 1  # the last layer, and the dropout modules just before it
    while tail > 0 and isinstance(layers[tail - 1], nn.modules.dropout._DropoutNd):
        tail -= 1
    h = x
    for layer in layers[:tail]:
        h = layer(h)
    z = h
    for layer in layers[tail:]:
        h = layer(h)
    return z.flatten(1), h


def contrastive_loss(
    z: torch.Tensor, z_glob: torch.Tensor, z_prev: torch.Tensor, temperature: float
) -> torch.Tensor:
    """ℓ_con (MOON eq. (2)), averaged over the minibatch.

    −log(e^{sim(z, z_glob)/τ} / (e^{sim(z, z_glob)/τ} + e^{sim(z, z_prev)/τ})) with sim the cosine similarity,
    i.e. the cross-entropy of the logits [sim_glob/τ, sim_prev/τ] against class 0.
    """
    pos = F.cosine_similarity(z, z_glob, dim=1) / temperature
    neg = F.cosine_similarity(z, z_prev, dim=1) / temperature
    logits = torch.stack([pos, neg], dim=1)
    return F.cross_entropy(logits, torch.zeros(len(z), dtype=torch.long))


class MOONObjective:
    """ℓ = ℓ_sup + μ·ℓ_con (MOON eq. (3)); the device's last trained model is kept in ``state.memory``.

    Args:
        model: the pool's full model (its architecture is copied twice, for the global and the previous
            model, both frozen).
        mu: μ.
        temperature: τ.
    """

    def __init__(self, model: nn.Module, mu: float, temperature: float) -> None:
        if not isinstance(layers_of(model)[-1], nn.Linear):
            raise ValueError("MOON needs a model whose last layer is nn.Linear (its input is z)")
        self.mu = float(mu)
        self.temperature = float(temperature)
        self.glob = self._frozen(model)
        self.prev = self._frozen(model)
        self.has_prev = False

    @staticmethod
    def _frozen(model: nn.Module) -> nn.Module:
        net = copy.deepcopy(model)
        for p in net.parameters():
            p.requires_grad_(False)
        return net.eval()

    def begin(self, state: FLClientState, model: nn.Module, params: Sequence[torch.Tensor]) -> None:
        """Load the received global model and, when the device has one, its previous local model."""
        self.glob.load_state_dict(model.state_dict())
        self.has_prev = "prev" in state.memory
        if self.has_prev:
            self.prev.load_state_dict(state.memory["prev"])

    def loss(
        self,
        state: FLClientState,
        model: nn.Module,
        params: Sequence[torch.Tensor],
        x: torch.Tensor,
        y: torch.Tensor,
    ) -> torch.Tensor:
        """ℓ_sup(logits, y) + μ·ℓ_con(z; z_glob, z_prev) on one minibatch."""
        z, logits = representation_and_logits(model, x)
        loss = F.cross_entropy(logits, y)
        if self.has_prev and self.mu > 0:
            with torch.no_grad():
                z_glob = representation_and_logits(self.glob, x)[0]
                z_prev = representation_and_logits(self.prev, x)[0]
            loss = loss + self.mu * contrastive_loss(z, z_glob, z_prev, self.temperature)
        return loss

    def end(self, state: FLClientState, model: nn.Module, params: Sequence[torch.Tensor]) -> None:
        """Keep the trained model as the device's previous local model."""
        state.memory["prev"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
