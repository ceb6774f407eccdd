"""MOON options (Li, He & Song, CVPR 2021, "Model-Contrastive Federated Learning")."""

from __future__ import annotations

from dataclasses import dataclass

from raysfl.config import Above, option


@dataclass(frozen=True)
class MOONParams:
    """Options of MOON: FedAvg rounds whose devices add μ·ℓ_con, the model-contrastive loss (eqs. (1)-(3)).

    ℓ_con = −log(exp(sim(z, z_glob)/τ) / (exp(sim(z, z_glob)/τ) + exp(sim(z, z_prev)/τ))) with z the
    representation of the local model being trained, z_glob that of the received global model and z_prev
    that of the device's local model from its previous round; sim is the cosine similarity [P].
    """

    mu: float = option(
        1.0, ge=0, doc="μ weighting ℓ_con [P]; paper: 5 (CIFAR-10), 1 (CIFAR-100, Tiny-ImageNet)"
    )
    temperature: float = option(0.5, gt=0, doc="τ of ℓ_con [P: 0.5]")
    aggregation: str = option(
        "data-size",
        choices=("data-size", "uniform"),
        doc="round average weighted by |D_k| [P] (MOON Algorithm 1), or uniform 1/C [A]",
    )
    charge_frozen_passes: bool = option(
        False,
        doc="charge each local step's two frozen forward passes (global and previous model) on the "
        "emulated clock, from a device's second job on; off [A]: FedASMU's Table 4 gives MOON exactly "
        "FedAvg's times to target in four settings (FedProx's in a fifth), as uncharged passes would",
        applies={"mu": Above(0.0)},
    )
