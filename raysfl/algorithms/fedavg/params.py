"""FedAvg options (McMahan et al. 2017; the GAS code's baseline, GAS spec §10.10)."""

from __future__ import annotations

from dataclasses import dataclass

from raysfl.algorithms.common.optim import optimizer_state_option
from raysfl.config import option


@dataclass(frozen=True)
class FedAvgParams:
    """Options of synchronous FedAvg: C of K clients per round, E local steps, one aggregation per round.

    C, K, E and the optimizer are the scenario's ``federation`` and ``train`` sections.
    """

    aggregation: str = option(
        "data-size",
        choices=("data-size", "uniform"),
        doc="round average weighted by |D_k| [P] (McMahan et al. 2017) [C] GAS §10.10, or uniform 1/C [A]",
    )
    optimizer_state: str = optimizer_state_option()
