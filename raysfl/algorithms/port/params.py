"""PORT options (Su & Li, IWQoS 2022, "How Asynchronous can Federated Learning Be?")."""

from __future__ import annotations

from dataclasses import dataclass

from raysfl.config import option


@dataclass(frozen=True)
class PORTParams:
    """Options of PORT: buffered asynchronous aggregation with staleness- and divergence-aware weights.

    Every ``buffer_size`` arrivals the server takes w ← w + Σ_i p_i·Δ_i with p_i ∝ (|D_i|/Σ|D|)·
    (ω_sim·(cos_i + 1)/2 + ω_stale·b/(s_i + b)), cos_i the cosine similarity of the update and the global
    model's progress since the update's base, s_i its staleness, and Δ_i = w_i − w_t measured from the
    current model (``delta_base``); an aggregation waits while a running job is more than b versions old
    (the staleness bound). The paper describes the weights as polynomial functions of
    staleness and divergence; the concrete forms and values are those of the authors' implementation
    in the Plato framework [C].
    """

    buffer_size: int = option(
        5, ge=1, doc="arrivals per aggregation (Plato minimum_clients_aggregated) [C]; 5 [A]"
    )
    staleness_bound: int = option(
        10,
        ge=1,
        doc="b: no aggregation while a running job is more than b versions old; b in b/(s+b) [C: 10]",
    )
    delta_base: str = option(
        "global",
        choices=("global", "start"),
        doc="Δ_i of w ← w + Σ p_i·Δ_i: w_i − w_t, from the current model (global: the authors' Plato code "
        "compares the weights received with the current global model, so w ← Σ p_i·w_i) [C], or w_i − "
        "w_{τ_i}, from the model its job started from (start) [A]",
    )
    request_update: bool = option(
        True,
        doc="urgent requests: a job that holds an aggregation back reports the model of its completed "
        "local steps at once instead of being waited for [C: Plato request_update = true]",
    )
    similarity_weight: float = option(1.0, ge=0, doc="ω_sim [C: 1]")
    staleness_weight: float = option(3.0, ge=0, doc="ω_stale [C: 3]")
    replacement: str = option(
        "others",
        choices=("others", "any"),
        doc="a finished client's replacement is drawn from the other idle clients [C] GAS §10.2, or any [A]",
    )

    def __post_init__(self) -> None:
        """The weights must not all vanish."""
        if self.similarity_weight == 0 and self.staleness_weight == 0:
            raise ValueError("similarity_weight and staleness_weight cannot both be 0")
