"""FedBuff options (Nguyen et al. 2022, "Federated Learning with Buffered Asynchronous Aggregation")."""

from __future__ import annotations

from dataclasses import dataclass

from raysfl.algorithms.common.optim import optimizer_state_option
from raysfl.algorithms.common.staleness import StalenessOptions, canonical_staleness
from raysfl.config import option


@dataclass(frozen=True)
class FedBuffParams(StalenessOptions):
    """Options of FedBuff: client deltas fill a buffer of K_buf; a full buffer makes one server step.

    Paper: w ← w + η_g·(1/K_buf)·Σ s(τ_i)·Δ_i [P]. GAS code: the global model becomes the plain average of
    the K_buf buffered models (GAS spec §10.10) [C] = ``mode = "code"``. The staleness scaling s(τ) is the
    shared group (:class:`StalenessOptions`): ``constant`` by default, i.e. none [A] (GAS code [C]); the
    polynomial with a = 0.5 is the paper's 1/√(1 + τ) [P].
    """

    buffer_size: int = option(
        10, ge=1, doc="K_buf, client updates per server step [P]; GAS code: = C = 10 [C]"
    )
    server_lr: float = option(1.0, gt=0, doc="server learning rate η_g [P]; 1 = plain averaged deltas [A]")
    mode: str = option(
        "paper",
        choices=("paper", "code"),
        doc="paper: w + η_g·mean s·Δ [P]; code: average of the buffered models, η_g and s unused [C] §10.10",
    )
    replacement: str = option(
        "others",
        choices=("others", "any"),
        doc="a finished client's replacement is drawn from the other idle clients [C] GAS §10.2, or any [A]",
    )
    optimizer_state: str = optimizer_state_option()

    def __post_init__(self) -> None:
        """The code's model averaging has no server learning rate and no staleness scaling."""
        scaled = canonical_staleness(self.staleness) != "constant"
        if self.mode == "code" and (self.server_lr != 1.0 or scaled):
            raise ValueError(
                "mode = 'code' averages the buffered models (GAS code); it needs server_lr = 1 and "
                "staleness = 'constant' (use mode = 'paper' for a server learning rate or staleness scaling)"
            )
