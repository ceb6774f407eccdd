"""Unbiased stochastic q-bit gradient quantization (Lightweight FedSL eq. (11)-(12), spec §3.4).

For a gradient vector g ∈ R^M with g_min = min_m |g_m| and g_max = max_m |g_m|, the magnitude range is cut
into 2^q − 1 intervals by the knobs (eq. (11))

    n_i = g_min + u_i·Δ,   Δ = (g_max − g_min)/(2^q − 1),   u_i ∈ {0, 1, …, 2^q − 1},

and every |g_m| ∈ [n_{i−1}, n_i) is rounded stochastically to one of its two knobs (eq. (12)):

    Q(g_m) = sign(g_m)·n_{i−1}  with probability (n_i − |g_m|)/Δ,
    Q(g_m) = sign(g_m)·n_i      with probability (|g_m| − n_{i−1})/Δ,

so E[Q(g)] = g (Assumption 6) and E‖Q(g) − g‖² ≤ M·Δ²/4. The sign is kept and sign(0) = 0, so pruned
(masked) entries stay exactly 0. ``bits >= 32`` means no quantization (the traditional-FedSL baseline).

Example:
    >>> import torch
    >>> g = torch.tensor([0.0, 0.25, -1.0])
    >>> stochastic_quantize(g, 1, torch.Generator().manual_seed(0)).abs().tolist() in (
    ...     [0.0, 0.0, 1.0], [0.0, 1.0, 1.0])
    True
"""

from __future__ import annotations

import torch

NO_QUANTIZATION_BITS = 32
"""q at or above which the gradient is used as it is (the paper's baseline, "no compression")."""


def quant_step(g_min: float, g_max: float, bits: int) -> float:
    """Δ = (g_max − g_min)/(2^q − 1), the knob spacing of eq. (11)."""
    return (g_max - g_min) / (2**bits - 1)


def stochastic_quantize(g: torch.Tensor, bits: int, generator: torch.Generator) -> torch.Tensor:
    """Q_q(g) of eq. (12) over the whole tensor (one range); returns a new tensor of ``g``'s shape and dtype.

    Args:
        g: the (masked) gradient; any shape, treated as one vector.
        bits: q >= 1; q >= 32 returns ``g`` unchanged (a copy).
        generator: the CPU generator of the Bernoulli draws (the client's own stream).
    """
    if bits < 1:
        raise ValueError(f"bits must be >= 1, got {bits}")
    if bits >= NO_QUANTIZATION_BITS or g.numel() == 0:
        return g.clone()
    mag = g.detach().abs().to(torch.float64)
    g_min, g_max = float(mag.min()), float(mag.max())
    delta = quant_step(g_min, g_max, bits)
    if delta == 0.0:
        return g.clone()
    u = (mag - g_min) / delta
    lo = torch.floor(u)
    draw = torch.rand(u.shape, generator=generator, dtype=torch.float64, device="cpu").to(u.device)
    level = torch.clamp(lo + (draw < (u - lo)).to(torch.float64), 0, 2**bits - 1)
    out = torch.sign(g.detach()).to(torch.float64) * (g_min + level * delta)
    return out.to(g.dtype)


def quantize_gradients(
    grads: list[torch.Tensor], bits: int, generator: torch.Generator, scope: str = "global"
) -> list[torch.Tensor]:
    """Q_q of the client-side gradient, one range over all tensors or one per tensor.

    ``global``: the paper's single vector g ∈ R^M [P] §II-A4 (spec §3.4); ``per-tensor``: a range per tensor
    [A].
    """
    if bits >= NO_QUANTIZATION_BITS:
        return [g.clone() for g in grads]
    if scope == "per-tensor":
        return [stochastic_quantize(g, bits, generator) for g in grads]
    if scope != "global":
        raise ValueError(f"scope must be 'global' or 'per-tensor', got {scope!r}")
    flat = torch.cat([g.reshape(-1) for g in grads])
    q = stochastic_quantize(flat, bits, generator)
    out, start = [], 0
    for g in grads:
        out.append(q[start : start + g.numel()].view_as(g))
        start += g.numel()
    return out
