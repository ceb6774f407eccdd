"""Activation dropout on the uplink (Lightweight FedSL eq. (3), Corollary 1; spec §3.1).

For every element (or channel) i of the split-layer output, δ_i ~ Bernoulli(1 − p) and

    ã_i = δ_i·a_i/(1 − p)        (inverted scaling, so E[ã_i] = a_i, Corollary 1)

Only the kept entries travel: the client sends the values ã_i with δ_i = 1 as one flat vector, and the
server rebuilds the tensor from the same mask. The mask is drawn from a seed both ends derive from
(scenario seed, client, round), so it costs no bits (``mask_overhead = "seed"`` [A]) or, optionally, is sent
as a bitmap of one bit per element (``"bitmap"``). The coordinator draws the same mask to know how many values
are sent, hence the exact bytes and uplink time, without seeing a tensor.

Example:
    >>> m = dropout_mask(seed=1, client=0, round_index=3, shape=(2, 4, 2, 2), p=0.5)
    >>> m.shape, m.dtype, kept_count(1, 0, 3, (2, 4, 2, 2), 0.5) == int(m.sum())
    ((2, 4, 2, 2), dtype('bool'), True)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from raysfl.algorithms.common.device import to_device

GRANULARITIES = ("element", "channel")
_TAG = 0x4C46534C  # "LFSL": keeps these seeds apart from every other stream derived from the scenario seed


def dropout_mask(
    seed: int, client: int, round_index: int, shape: Sequence[int], p: float, granularity: str = "element"
) -> np.ndarray:
    """The keep-mask δ (bool, ``shape`` = (b, C, H, W) or (b, F)) of ``client`` in round ``round_index``.

    ``element``: one Bernoulli(1 − p) per scalar (default [A]: "randomly dropping 30% of the activation
    values"); ``channel``: one per (sample, channel), broadcast over the spatial positions [A] option.
    """
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    shape = tuple(int(s) for s in shape)
    if p <= 0.0:
        return np.ones(shape, dtype=bool)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([_TAG, seed, client, round_index])))
    if granularity == "channel" and len(shape) > 2:
        draw = rng.random(shape[:2]) >= p
        return np.broadcast_to(draw.reshape(shape[:2] + (1,) * (len(shape) - 2)), shape).copy()
    return rng.random(shape) >= p


def kept_count(
    seed: int, client: int, round_index: int, shape: Sequence[int], p: float, granularity: str = "element"
) -> int:
    """How many activation values client ``client`` sends in round ``round_index`` (Σ δ_i)."""
    return int(dropout_mask(seed, client, round_index, shape, p, granularity).sum())


def bitmap_bytes(numel: int) -> int:
    """Bytes of a packed one-bit-per-element mask (``mask_overhead = "bitmap"``)."""
    return -(-numel // 8)


def drop(acts: torch.Tensor, mask: np.ndarray, p: float) -> torch.Tensor:
    """The transmitted vector: ã_i = a_i/(1 − p) at the kept positions, flattened in row-major order."""
    keep = torch.from_numpy(mask).to(acts.device)
    return (acts[keep] / (1.0 - p)) if p > 0 else acts.reshape(-1).clone()


def restore(values: torch.Tensor, mask: np.ndarray) -> torch.Tensor:
    """Ã: the received values put back at the kept positions, zeros elsewhere (server side)."""
    out = torch.zeros(mask.shape, dtype=values.dtype, device=values.device)
    out.view(-1)[_kept(mask, values.device)] = values.reshape(-1)  # = out[mask] = values, no device read
    return out


def gather(full: torch.Tensor, mask: np.ndarray) -> torch.Tensor:
    """The downlink vector ∂F/∂Ã at the kept positions (the client knows the mask; spec §2.3)."""
    return full.reshape(-1)[_kept(mask, full.device)].contiguous()  # = full[mask], no device read


def _kept(mask: np.ndarray, device: torch.device) -> torch.Tensor:
    """The flat positions of ``mask``'s kept values in row-major order, found on the host, on ``device``.

    Indexing with a boolean mask on a GPU reads the count of kept values back from the device; positions
    computed from the host-side mask need no such read.
    """
    return to_device(torch.from_numpy(np.flatnonzero(mask)), device)
