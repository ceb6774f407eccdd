"""FedProx options.

Li, Sahu, Zaheer, Sanjabi, Talwalkar & Smith, MLSys 2020, "Federated Optimization in Heterogeneous
Networks".
"""

from __future__ import annotations

from dataclasses import dataclass

from raysfl.config import Above, option


@dataclass(frozen=True)
class FedProxParams:
    """Options of FedProx: FedAvg rounds whose devices minimise h_k(w; w^t) = F_k(w) + μ/2·‖w − w^t‖².

    Li et al. 2020, eq. (2) and Algorithm 2 [P]. C, K, E and the optimizer are the scenario's
    ``federation`` and ``train`` sections. Systems heterogeneity (Sec. 5): a fraction of each round's devices
    are stragglers that run fewer local steps (γ-inexact solutions kept, FedProx) or are dropped (FedAvg).
    """

    mu: float = option(
        0.01,
        ge=0,
        doc="μ of the proximal term μ/2·‖w − w^t‖² [P]; value [A] (paper grid {0.001, 0.01, 0.1, 1})",
    )
    aggregation: str = option(
        "data-size",
        choices=("data-size", "uniform"),
        doc="round average weighted by |D_k| [A] (FedAvg's), or uniform 1/C as Algorithm 2 [P] with "
        "its p_k-proportional sampling replaced by uniform sampling [A]",
    )
    straggler_fraction: float = option(
        0.0,
        ge=0,
        le=1,
        doc="fraction of each round's C devices made stragglers (Sec. 5, systems heterogeneity) [P]; "
        "round(fraction·C) of them, drawn uniformly without replacement from the policy's stream [A]",
    )
    straggler_work: str = option(
        "uniform",
        choices=("uniform",),
        doc="a straggler's local steps, drawn uniformly from {1, ..., E} [P] (epochs in the paper, "
        "minibatch steps here [A]); its emulated compute time counts only those steps",
    )
    drop_stragglers: bool = option(
        False,
        doc="discard the stragglers instead of keeping their partial work: the paper's FedAvg comparison "
        "[P]; they run no job and the round averages the other C − round(fraction·C) models",
        applies={"straggler_fraction": Above(0.0)},
    )


def straggler_count(fraction: float, active: int) -> int:
    """Stragglers per round: round(fraction·C), ties to even (Python's ``round``) [A].

    Example:
        >>> [straggler_count(f, c) for f, c in ((0.0, 10), (0.5, 10), (0.9, 10), (0.5, 3))]
        [0, 5, 9, 2]
    """
    return int(round(fraction * active))
