"""Lightweight FedSL options (specs/lightweight-fedsl.md): every [A] choice of the spec is a named field.

Tags: [P] the paper (Zhang, Ni, Wang, "Federated Split Learning with Model Pruning and Gradient Quantization
in Wireless Networks"), [A] our choice where it is silent (no public code exists, so no [C]). Defaults are the
paper's "lightweight FedSL" (ρ_f = 0.35, q = 8, p = 0.3, I = 5); :class:`TraditionalFedSLParams` switches the
three compressions off and aggregates every round, the paper's baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

from raysfl.algorithms.lightweight_fedsl.dropout import GRANULARITIES
from raysfl.algorithms.lightweight_fedsl.pruning import PRUNE_SCOPES
from raysfl.config import Above, Below, option

_PRUNING = {"prune_final": Above(0.0)}
"""The pruning schedule's options are read only when the client part is pruned at all."""


@dataclass(frozen=True)
class LightweightFedSLParams:
    """Options of lightweight FedSL: pruning, quantization, activation dropout, aggregation every I rounds."""

    prune_final: float = option(0.35, ge=0, lt=1, doc="ρ_f: final client-side sparsity [P] (0 = no pruning)")
    prune_rounds: int = option(
        0,
        ge=0,
        doc="T of ρ_t = ρ_f(1-(1-t/T)^3) (eq. 10); 0 = train.global_iterations [A]",
        applies=_PRUNING,
    )
    prune_scope: str = option(
        "global",
        choices=PRUNE_SCOPES,
        doc="rank |w⊙g| over all client weights [P] §II-A3, or per layer [A]",
        applies=_PRUNING,
    )
    literal_regrowth: bool = option(
        False,
        doc="apply the mask only in rounds that re-prune (Alg. 1 literally) [A]; false = persistent mask, "
        "pruned weights never regrow (Appendix A) [A]",
        applies=_PRUNING,
    )
    quant_bits: int = option(8, ge=1, le=32, doc="q: bits of the stochastic gradient quantizer [P]; 32 = off")
    quant_scope: str = option(
        "global",
        choices=("global", "per-tensor"),
        doc="one [g_min, g_max] range over the whole client gradient g ∈ R^M [P], or per tensor [A]",
        applies={"quant_bits": Below(32)},
    )
    dropout: float = option(0.3, ge=0, lt=1, doc="p: activation dropout rate on the uplink [P] (0 = off)")
    dropout_granularity: str = option(
        "element",
        choices=GRANULARITIES,
        doc="one Bernoulli per activation value [A], or per channel [A]",
        applies={"dropout": Above(0.0)},
    )
    mask_overhead: str = option(
        "seed",
        choices=("seed", "bitmap"),
        doc="dropout mask from a seed shared with the server (0 bits) [A], or sent as a 1-bit bitmap [A] "
        "(none without dropout)",
        applies={"dropout": Above(0.0)},
    )
    agg_interval: int = option(5, ge=1, doc="I: FedAvg the client-side models every I rounds [P] (eq. 14)")
    label_dtype: str = option(
        "int32", choices=("int32", "int64"), doc="labels on the uplink: ω_lbl = 32 bits [A] spec §2.3"
    )
    sparse_speedup: float = option(
        0.0,
        ge=0,
        le=1,
        doc="χ: share of pruned FLOPs that dense kernels save; client compute = bΦ(1-χs). 0 = unstructured "
        "zeros save nothing on dense kernels [A] spec §2.3",
        applies=_PRUNING,
    )
    importance_flops_per_param: float = option(
        2.0,
        ge=0,
        doc="c_imp: FLOPs per client parameter to score |w⊙g|, charged every round while prune_final > 0 "
        "(the policy times a round before the client's check; pruning fires in almost every round) [A] "
        "spec §2.3",
        applies=_PRUNING,
    )
    update_flops_per_param: float = option(
        2.0, ge=0, doc="c_upd: FLOPs per client parameter of the masked, quantized update [A] spec §2.3"
    )
    server_batching: str = option(
        "per-client",
        choices=("per-client", "concatenated"),
        doc="server gradient eq. (7): one pass per client with the same w_s [A], or one pass over the K·b "
        "batch (identical without BatchNorm) [A]",
    )

    @property
    def sends_bitmap(self) -> bool:
        """Whether a client's upload carries its dropout mask as a bitmap: only when something is dropped."""
        return self.mask_overhead == "bitmap" and self.dropout > 0


@dataclass(frozen=True)
class TraditionalFedSLParams(LightweightFedSLParams):
    """The paper's baseline "traditional FedSL": no pruning, no quantization, no dropout, I = 1 [P] §IV."""

    prune_final: float = option(0.0, ge=0, lt=1, doc="ρ_f: 0 = no pruning (baseline) [P]")
    quant_bits: int = option(32, ge=1, le=32, doc="q: 32 = no quantization (baseline) [P]")
    dropout: float = option(0.0, ge=0, lt=1, doc="p: 0 = no activation dropout (baseline) [P]")
    agg_interval: int = option(1, ge=1, doc="I: aggregate every round (baseline) [P]")
