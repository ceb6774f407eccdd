"""GAS options: every paper-vs-code difference of specs/gas.md §11 is a named field."""

from __future__ import annotations

from dataclasses import dataclass

from raysfl.config import Above, option

_GENERATING = {"generate": (True,)}
"""The statistics, sampling and weighting options are read only when activations are generated."""


@dataclass(frozen=True)
class GASParams:
    """Options of GAS (Yang & Liu, "Generative Activation-Aided Asynchronous Split FL").

    Defaults follow the paper [P]; the reference code's behaviour [C] is one option away.

    ``weighting``, ``weight_a`` and ``weight_b`` are deliberately not the shared staleness group of
    FedAsync and FedBuff (:class:`raysfl.algorithms.common.staleness.StalenessOptions`): that s(τ)
    *decreases* with an update's staleness τ to damp old models, while GAS's s(n) (§5, eqs. (11)-(12))
    *increases* with the progress n at which activation statistics were recorded, so fresher statistics
    count more. Different functions, argument and direction; they share only the letter s.
    """

    q_s: int = option(
        10, ge=1, doc="activation buffer size Q_s in minibatches (Q_s·B samples); code: = C [C]"
    )
    q_c: int = option(10, ge=1, doc="model buffer size Q_c; code: = C [C]")
    generate: bool = option(
        True, doc="generate activations from per-label Gaussians; false = plain async SFL"
    )
    weighting: str = option(
        "linear",
        choices=("linear", "polynomial", "exponential"),
        doc="s(n): linear a·n [P], polynomial a·n^b, exponential a·e^(b·n) (GAS §5)",
        applies=_GENERATING,
    )
    weight_a: float = option(1.0, gt=0, doc="a of s(n)", applies=_GENERATING)
    weight_b: float = option(
        1.0,
        ge=0,
        doc="b of s(n) (polynomial exponent / exponential rate); ≥ 0, as GAS §5 asks s to increase",
        applies={**_GENERATING, "weighting": ("polynomial", "exponential")},
    )
    progress: str = option(
        "paper",
        choices=("paper", "code"),
        doc="n(A): paper = tE+e [P], t the model version the client trains [A], e its local iteration; "
        "code = per-client counters starting at the count at selection, the count growing by the server "
        "updates so far at each aggregation (§10.6) [C]",
        applies=_GENERATING,
    )
    stats_update: str = option(
        "per-activation",
        choices=("per-activation", "per-flush"),
        doc="eqs. (11)-(12) per received activation [P], or batched per buffer flush [C]",
        applies=_GENERATING,
    )
    covariance: str = option(
        "full",
        choices=("full", "diagonal"),
        doc="per-label covariance Σ_y [C: full]",
        applies=_GENERATING,
    )
    ridge: float = option(
        1e-5,
        ge=0,
        doc="ridge·I on Σ_y: added when sampling (per-activation), or at each merge after a label's first "
        "batch (per-flush, the code's 1e-5) [C]",
        applies=_GENERATING,
    )
    sampler: str = option(
        "cholesky",
        choices=("cholesky", "low-rank"),
        doc="how Â ~ N(μ_y, Σ_y + ridge·I) is drawn (full covariance): cholesky = a factor of Σ_y at every "
        "change, as the code [C]; low-rank = the same Gaussian from the merged rows of eq. (12) plus a "
        "factor refreshed every low_rank_rows rows, other random numbers (raysfl.algorithms.gas.lowrank) [A]",
        applies=_GENERATING,
    )
    low_rank_rows: int = option(
        0,
        ge=0,
        doc="rows of eq. (12) a label keeps before the low-rank sampler refactorises; 0 = d",
        applies={**_GENERATING, "sampler": ("low-rank",)},
    )
    generation: str = option(
        "equal",
        choices=("equal", "top-up"),
        doc="equal = every label gets the same count in A_concat ([P] aim; [A] reading: up to the most "
        "frequent label's count); top-up = each label to ≥ B [C]",
        applies=_GENERATING,
    )
    generation_gate: str = option(
        "any-label",
        choices=("any-label", "all-labels"),
        doc="generate for every label with statistics [A], or nothing until all M labels have statistics "
        "(GAS_main.py all_labels_have_stats) [C]",
        applies=_GENERATING,
    )
    logit_adjustment: bool = option(True, doc="eq. (6): loss for G_k on logits + log P_k(y) [P]")
    la_tau: float = option(
        1.0,
        ge=0,
        doc="logit-adjustment temperature τ in log P_k(y)^τ [C]",
        applies={"logit_adjustment": (True,)},
    )
    aggregation: str = option(
        "data-size", choices=("data-size", "uniform"), doc="eq. (10) |D_k|-weighted [P] or uniform 1/Q_c [C]"
    )
    server_update: str = option(
        "before-gradient",
        choices=("before-gradient", "after-gradient"),
        doc="server step before computing G_k (Alg. 1) [P] or after the client step (code) [C]",
    )
    optimizer_state: str = option(
        "per-job",
        choices=("per-job", "shared"),
        doc="client momentum starts fresh with each job [A], or one buffer carried across all clients [C]",
    )

    dissimilarity_every: int = option(
        0,
        ge=0,
        doc="measure the server update's gradient dissimilarity ‖∇F_s − ∇F‖² (Assumption 3, Lemma 1, "
        "Fig. 2(a)) every N server updates; 0 = never. A diagnostic: the run's numbers stay the same "
        "(raysfl.algorithms.gas.dissimilarity)",
        diagnostic=True,
    )
    dissimilarity_samples: int = option(
        1280,
        ge=1,
        doc="test rows of the fixed reference sample that estimates ∇F (the code: 10 × 128 fresh rows) [A]",
        applies={"dissimilarity_every": Above(0)},
    )

    def __post_init__(self) -> None:
        """The low-rank sampler draws from full covariances only."""
        if self.sampler == "low-rank" and self.covariance != "full":
            raise ValueError(
                "sampler = 'low-rank' draws from full covariances; set covariance = 'full' or "
                "sampler = 'cholesky'"
            )
