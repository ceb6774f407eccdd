"""CA2FL options (Wang et al., ICLR 2024, cached update calibration).

Paper: "Tackling the Data Heterogeneity in Asynchronous Federated Learning with Cached Update Calibration".
"""

from __future__ import annotations

from dataclasses import dataclass

from raysfl.algorithms.common.optim import optimizer_state_option
from raysfl.config import option


@dataclass(frozen=True)
class CA2FLParams:
    """Options of CA2FL: FedBuff's buffer plus a server cache of every client's latest update.

    Paper: v = h̄ + (1/|S|)·Σ_{i∈S}(Δ_i − h_i), then h_i ← Δ_i for i ∈ S and w ← w + η·v [P]. GAS code:
    w ← w + Σ_{i=1..K} |D_i|/Σ_j|D_j|·h_i over all K caches after each K_buf arrivals (GAS spec §10.10) [C].
    The GAS code also stores a *reference* to the global model in each refilled slot and trains a job when
    it is due, so such a job starts from the newest global model (``job_base = "aliased"`` [C]); the paper's
    asynchrony has each job start from the model it was sent (``"sent"`` [P]).
    """

    buffer_size: int = option(10, ge=1, doc="|S| = M, client updates per server step [P]; GAS code: 10 [C]")
    server_lr: float = option(1.0, gt=0, doc="global learning rate η [P]; 1 [A] (GAS code: none, i.e. 1 [C])")
    mode: str = option(
        "paper",
        choices=("paper", "code"),
        doc="paper: cached update calibration [P]; code: |D_i|-weighted sum of all K caches [C] GAS §10.10",
    )
    job_base: str = option(
        "sent",
        choices=("sent", "aliased"),
        doc="sent: a job trains from the model sent at its start [P]; aliased: from the global model when "
        "it is due, as the GAS code's slots alias it (the first C jobs excepted) [C] GAS §10.10",
    )
    replacement: str = option(
        "others",
        choices=("others", "any"),
        doc="a finished client's replacement is drawn from the other idle clients [C] GAS §10.2, or any [A]",
    )
    optimizer_state: str = optimizer_state_option()

    def __post_init__(self) -> None:
        """The code's form has no global learning rate."""
        if self.mode == "code" and self.server_lr != 1.0:
            raise ValueError(
                "mode = 'code' (GAS code's CA2FL) has no global learning rate; set server_lr = 1"
            )
