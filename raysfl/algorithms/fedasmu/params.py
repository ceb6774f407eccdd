"""FedASMU / FedSSMU options (specs/fedasmu.md; [P] the paper, [A] an implementation choice).

Paper: Jia, Liu et al., "Efficient Federated Learning with Timely Update Dissemination" (spec §3.8-3.9).

The paper's printed equations where the spec corrects them are options whose default is the correction:
``alpha_grad_sign`` (A5), ``sigma_derivative`` (A6), ``grad_denominator`` (A3/§3.3 item 5), ``control_record``
(A7/§3.3 item 4).
"""

from __future__ import annotations

from dataclasses import dataclass

from raysfl.config import option

SLOT_POLICIES = ("rl", "h1", "h2", "h3", "none")

_REQUESTS = {"request_slot": ("rl", "h1", "h2", "h3")}
"""The fresh-model request's options are read only when a device requests one (not FedASMU-FA)."""

_RL = {"request_slot": ("rl",)}
"""The slot learning's options (meta-model, Q-learning) are read only when the slot is learned."""


@dataclass(frozen=True)
class MUParams:
    """Options shared by FedASMU (asynchronous) and FedSSMU (synchronous)."""

    # --- local training ------------------------------------------------------------------------------
    local_epochs: int = option(5, ge=1, doc="𝓛, local epochs per training [A] spec §3.8 (not reported)")
    epoch_steps: int = option(
        0, ge=0, doc="minibatch steps per local epoch; 0 = one pass over D_i (ceil(D_i/B)) [A] spec A2"
    )
    lr_decay: float = option(
        0.99, gt=0, le=1, doc="η_i ← η·decay per round (sync) or per m' aggregations (async) [A] spec §3.8"
    )
    tau: int = option(99, ge=1, doc="τ, maximum staleness; staler uploads are discarded [P] Table 3")
    # --- server: dynamic staleness-aware aggregation (Eqs. 1-5) ---------------------------------------
    mu_alpha: float = option(10.0, gt=0, doc="μ_α of α = μξ/(1+μξ), Eq. (2) [P]; value [A] spec §3.8")
    lambda0: float = option(1.0, doc="initial λ of every device [A] spec §3.8")
    sigma0: float = option(0.5, doc="initial σ of every device [A] spec §3.8")
    iota0: float = option(0.0, doc="initial ι of every device [A] spec §3.8")
    eta_lambda: float = option(
        1e-4, ge=0, doc="η_λ [P] Table 3 (per setting)", applies={"learn_alpha": (True,)}
    )
    eta_sigma: float = option(
        1e-4, ge=0, doc="η_σ [P] Table 3 (per setting)", applies={"learn_alpha": (True,)}
    )
    eta_iota: float = option(
        1e-4, ge=0, doc="η_ι [P] Table 3 (per setting)", applies={"learn_alpha": (True,)}
    )
    learn_alpha: bool = option(
        True, doc="learn (λ, σ, ι) with Eq. (3) [P]; false = FedASMU-DA ablation (fixed controls) [P] §3.10"
    )
    alpha_grad_sign: str = option(
        "consistent",
        choices=("consistent", "paper"),
        doc="ĝ = −(w^i−w_o)/(η𝓛) (consistent, spec A5) or the paper's +(w^i−w_o)/(η𝓛) Eq. (4) [P]",
        applies={"learn_alpha": (True,)},
    )
    sigma_derivative: str = option(
        "exact",
        choices=("exact", "paper"),
        doc="∂ξ/∂σ = −λ·ln(s)/(√t s^σ) (exact, spec A6) or the paper's ln(σ) factor of Eq. (5) [P]",
        applies={"learn_alpha": (True,)},
    )
    control_record: str = option(
        "own-record",
        choices=("own-record", "literal-prev-version"),
        doc="the aggregation Eqs. (4)-(5) differentiate through: device i's own last one (own-record, spec "
        "§3.3 item 4 [A]) or the one that produced w_o, the base of its training, whichever device it "
        'aggregated (literal-prev-version, the paper\'s "(o−1)-th aggregation" [P])',
        applies={"learn_alpha": (True,)},
    )
    grad_denominator: str = option(
        "epochs",
        choices=("epochs", "steps"),
        doc="ĝ divides by η·𝓛 (epochs, as printed [P]) or η·K_i SGD steps [A] spec §3.3 item 5",
        applies={"learn_alpha": (True,)},
    )
    project_controls: bool = option(
        True, doc="keep λ, σ, ι ≥ 0 after each update [A] spec §3.3", applies={"learn_alpha": (True,)}
    )
    xi_min: float = option(1e-6, gt=0, doc="clamp ξ ≥ ξ_min [A] spec A9")
    alpha_min: float = option(1e-3, gt=0, lt=1, doc="clamp α ≥ α_min [A] spec A9 (Theorem 1 needs α_min > 0)")
    alpha_max: float = option(0.999, gt=0, le=1, doc="clamp α ≤ α_max [A] spec A9")
    # --- device: timely fresh-model request and merge (Eqs. 6-11) -------------------------------------
    request_slot: str = option(
        "rl",
        choices=SLOT_POLICIES,
        doc="l*: rl (server LSTM meta-policy, then per-device Q-learning) [P]; h1 l*=2, h2 ⌊𝓛/2⌋+1, "
        "h3 𝓛−1 [P] ablation; none = FedASMU-FA (no request) [P] §3.10",
    )
    first_slot: int = option(
        2,
        ge=1,
        doc="smallest request slot (epoch at whose start the request is sent); 1 allowed [A] §3.6",
        applies=_REQUESTS,
    )
    fresh_download: str = option(
        "blocking",
        choices=("blocking", "overlap"),
        doc="blocking: the device waits δ_req + t_down for the fresh model [A] spec A11; overlap: it trains "
        "on and merges at the first epoch boundary after the model arrives [A]",
        applies=_REQUESTS,
    )
    request_latency_s: float = option(
        0.0, ge=0, doc="δ_req, latency of the request message, s [A] §2.6", applies=_REQUESTS
    )
    mu_beta: float = option(
        10.0, gt=0, doc="μ_β of β = μϕ/(1+μϕ), Eq. (10) [P]; value [A] spec §3.8", applies=_REQUESTS
    )
    gamma0: float = option(1.0, doc="initial γ of every device [A] spec §3.8", applies=_REQUESTS)
    upsilon0: float = option(0.5, doc="initial υ of every device [A] spec §3.8", applies=_REQUESTS)
    eta_gamma: float = option(1e-4, ge=0, doc="η_γ [P] Table 3 (per setting)", applies=_REQUESTS)
    eta_upsilon: float = option(1e-4, ge=0, doc="η_υ [P] Table 3 (per setting)", applies=_REQUESTS)
    beta_max: float = option(
        0.999, gt=0, le=1, doc="clamp β ≤ β_max (and ϕ ≥ 0) [A] spec §3.5", applies=_REQUESTS
    )
    # --- RL for the request slot (Eqs. 7-8) -------------------------------------------------------------
    epsilon: float = option(0.1, ge=0, le=1, doc="ε of the ε-greedy slot choice [A] spec §3.6", applies=_RL)
    q_lr: float = option(0.1, ge=0, le=1, doc="φ_Q, Q-learning rate of Eq. (8) [A] spec §3.6", applies=_RL)
    q_discount: float = option(
        0.9, ge=0, le=1, doc="ψ, Q-learning discount of Eq. (8) [A] spec §3.6", applies=_RL
    )
    baseline_rho: float = option(
        0.1, ge=0, le=1, doc="ρ of the reward baseline EMA b [A] spec §3.6", applies=_RL
    )
    rl_lr: float = option(0.001, ge=0, doc="η_RL, meta-model learning rate, Eq. (7) [P] Table 3", applies=_RL)
    lstm_hidden: int = option(64, ge=1, doc="hidden size of the LSTM meta-model [A] spec §3.6", applies=_RL)

    def slot_for(self, policy: str) -> int:
        """The fixed l* of a heuristic (H1 2, H2 ⌊𝓛/2⌋+1, H3 𝓛−1, spec §3.6), clipped to [first_slot, 𝓛]."""
        big_l = self.local_epochs
        raw = {"h1": 2, "h2": big_l // 2 + 1, "h3": big_l - 1}[policy]
        return min(max(raw, self.first_slot), big_l)

    def __post_init__(self) -> None:
        """Cross-field rules: slots lie in 1..𝓛; α_min ≤ α_max."""
        if self.first_slot > self.local_epochs:
            raise ValueError(f"first_slot ({self.first_slot}) exceeds local_epochs ({self.local_epochs})")
        if self.alpha_min > self.alpha_max:
            raise ValueError(f"alpha_min ({self.alpha_min}) exceeds alpha_max ({self.alpha_max})")


@dataclass(frozen=True)
class FedASMUParams(MUParams):
    """FedASMU (Algorithms 1-2): triggered asynchronous training with per-arrival aggregation."""

    trigger_period: float = option(10.0, gt=0, doc="𝒯: every 𝒯 emulated s, m' = C idle devices start [P]")
    max_concurrency: int = option(
        0, ge=0, doc="skip a trigger while this many devices train; 0 = no cap [A] spec §2.4 (A10)"
    )


@dataclass(frozen=True)
class FedSSMUParams(MUParams):
    """FedSSMU (Algorithm 3): synchronous rounds of C devices with in-round running aggregation."""

    sqrt_index: str = option(
        "round",
        choices=("round", "aggregations"),
        doc="√t of Eq. (2) and √g of Eq. (10): the round index g [A] spec A14, or aggregations so far + 1",
    )
