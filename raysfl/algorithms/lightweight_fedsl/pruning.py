"""Dynamic unstructured pruning of the client-side model (Lightweight FedSL eq. (9)-(10), Alg. 1 l. 14-18).

    ρ_t = ρ_f·[1 − (1 − t/T)^3]                          cubic sparsity target, ρ_0 = 0 (eq. (10))
    ℐ_m = |w_m·g_m|                                       first-order Taylor importance, per weight (eq. (9))
    m   = 0 on the ⌈ρ_t·M_p⌉ least important weights     ranked over every prunable weight [P] §II-A3

Prunable weights are conv and linear weight tensors (``dim > 1``); biases and BatchNorm parameters never are.
Weights already masked rank below every other weight, so masks are nested (pruned weights never come back;
spec §3.3, Appendix A); with ``literal_regrowth`` the mask is not passed and ℐ alone ranks them (Alg. 1).

Example:
    >>> round(sparsity_target(1, 10, 0.35), 4), sparsity_target(10, 10, 0.35), sparsity_target(0, 10, 0.35)
    (0.0948, 0.35, 0.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

PRUNE_SCOPES = ("global", "per-layer")


def sparsity_target(t: int, horizon: int, final: float) -> float:
    """ρ_t = ρ_f·[1 − (1 − t/T)^3] for 0 <= t <= T (eq. (10)); ρ_f after T."""
    if horizon < 1:
        raise ValueError(f"horizon T must be >= 1, got {horizon}")
    frac = min(max(t / horizon, 0.0), 1.0)
    return final * (1.0 - (1.0 - frac) ** 3)


def prune_count(target: float, total: int) -> int:
    """⌈ρ_t·M_p⌉ weights to be zero (a tiny tolerance keeps 0.35·100 at 35, not 36)."""
    return min(total, math.ceil(target * total - 1e-9))


def is_prunable(name: str, tensor: torch.Tensor) -> bool:
    """Conv and linear weight tensors only (spec §3.3 [A]): a ``weight`` of two or more dimensions."""
    return name.endswith("weight") and tensor.dim() > 1


def sparsity(weights: Mapping[str, torch.Tensor]) -> float:
    """Fraction of exact zeros among the given (prunable) weights."""
    total = sum(w.numel() for w in weights.values())
    zeros = sum(int((w == 0).sum()) for w in weights.values())
    return zeros / total if total else 0.0


def importance(w: torch.Tensor, g: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """ℐ = |w ⊙ g| (eq. (9), element-wise [A]); entries outside ``mask`` get −1 so they rank first."""
    score = (w.detach() * g.detach()).abs()
    if mask is not None:
        score = torch.where(mask, score, torch.full_like(score, -1.0))
    return score


def global_masks(
    scores: Mapping[str, torch.Tensor], target: float, scope: str = "global"
) -> dict[str, torch.Tensor]:
    """Keep-masks that zero the ⌈ρ_t·M_p⌉ lowest scores (``global``) or ⌈ρ_t·n_l⌉ per tensor (``per-layer``).

    Ties are broken by position (stable sort), so the result is deterministic.
    """
    if scope not in PRUNE_SCOPES:
        raise ValueError(f"scope must be one of {PRUNE_SCOPES}, got {scope!r}")
    if scope == "per-layer":
        return {n: _keep(s.reshape(-1), prune_count(target, s.numel())).view_as(s) for n, s in scores.items()}
    flat = torch.cat([s.reshape(-1) for s in scores.values()])
    keep = _keep(flat, prune_count(target, flat.numel()))
    out, start = {}, 0
    for n, s in scores.items():
        out[n] = keep[start : start + s.numel()].view_as(s)
        start += s.numel()
    return out


def _keep(flat: torch.Tensor, drop: int) -> torch.Tensor:
    keep = torch.ones_like(flat, dtype=torch.bool)
    if drop > 0:
        order = torch.argsort(flat, stable=True)
        keep[order[:drop]] = False
    return keep
