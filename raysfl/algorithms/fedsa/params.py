"""FedSA options.

Chen, Mao & Ma, Future Generation Computer Systems 117 (2021), "FedSA: A staleness-aware asynchronous
Federated Learning algorithm with non-IID data".
"""

from __future__ import annotations

from dataclasses import dataclass

from raysfl.config import option


@dataclass(frozen=True)
class FedSAParams:
    """Options of FedSA: semi-asynchronous aggregation, a staleness threshold, frequency-scaled rates.

    The server aggregates the first M arrivals, drops those staler than τ₀, and each device's learning
    rate shrinks with its participation frequency.

    Server: every M accepted arrivals, w ← Σ_i (|D_i|/Σ_j|D_j|)·w_i over them [P]; an arrival staler
    than τ₀ versions is dropped [A] (the paper bounds staleness by τ₀). Device i trains with
    η_i = η/(N·f_i), f_i its share of all jobs started so far and N the number of devices that have
    started one [A: our reading of the paper's frequency-based rate].
    """

    buffer_size: int = option(10, ge=1, doc="M, accepted arrivals per aggregation [P]; value [A]")
    tau0: int = option(
        10, ge=0, doc="τ₀: arrivals staler than τ₀ versions are dropped [P]; value and drop [A]"
    )
    aggregation: str = option(
        "models",
        choices=("models", "deltas"),
        doc="models: Σ p_i·w_i of the M models [P]; deltas: w + Σ p_i·(w_i − w_{τ_i}) [A]",
    )
    lr_scaling: str = option(
        "frequency",
        choices=("frequency", "none"),
        doc="η_i = η/(N·f_i) [P] (our reading [A]), or η for every device [A]",
    )
    lr_scale_max: float = option(
        2.0,
        ge=1,
        doc="cap of the factor 1/(N·f_i) (numerical safety) [A]",
        applies={"lr_scaling": ("frequency",)},
    )
    replacement: str = option(
        "others",
        choices=("others", "any"),
        doc="a finished client's replacement is drawn from the other idle clients [C] GAS §10.2, or any [A]",
    )
