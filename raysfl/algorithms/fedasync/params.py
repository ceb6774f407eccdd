"""FedAsync options (Xie, Koyejo & Gupta 2019, "Asynchronous Federated Optimization")."""

from __future__ import annotations

from dataclasses import dataclass

from raysfl.algorithms.common.staleness import StalenessOptions, staleness_option
from raysfl.config import aliases, option


@aliases(a="staleness_a", b="staleness_b")  # FedAsync's keys before the shared staleness group
@dataclass(frozen=True)
class FedAsyncParams(StalenessOptions):
    """Options of FedAsync: every arriving model is mixed into the global one at once.

    x_t = (1 − α_t)·x_{t−1} + α_t·x_new with α_t = α·s(t − τ) (Xie et al. 2019, Algorithm 1). The paper
    explores several α and staleness functions; the defaults here are one such setting [A]: the
    polynomial s with a = 0.5, b = 4 (:class:`StalenessOptions`; the old keys ``a`` and ``b`` still work).
    """

    staleness: str = staleness_option("polynomial")
    alpha: float = option(0.6, gt=0, le=1, doc="mixing hyperparameter α ∈ (0, 1] [P]; value [A]")
    rho: float = option(
        0.0, ge=0, doc="ρ of the local objective f(x) + ρ/2·‖x − x_τ‖² [P]; 0 = plain local SGD [A]"
    )
    staleness_offset: int = option(
        0,
        choices=(0, 1),
        doc="added to the staleness in s(·): 0 = global updates since the job's model, 0 when fresh [A] "
        "(Plato's FedAsync, FedBuff's τ); 1 = t − τ of Xie et al.'s Algorithm 1 read literally, whose "
        "epoch t makes x_t from x_{t−1}, 1 when fresh [P] (FedASMU's t − o + 1)",
        applies={"staleness": ("polynomial", "hinge")},
    )
    replacement: str = option(
        "others",
        choices=("others", "any"),
        doc="a finished client's replacement is drawn from the other idle clients [C] GAS §10.2, or any [A]",
    )
