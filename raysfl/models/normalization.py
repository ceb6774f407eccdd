"""Local response normalisation that sums channel windows plane by plane: ``nn.LocalResponseNorm``'s bits.

``F.local_response_norm`` normalises each activation by the mean of the squares in a window of ``size``
channels around it (Krizhevsky et al. 2012, §3.3; CSE-FSL's CIFAR-10 network, CSE-FSL spec §4.2):

    b_c = a_c / (k + α · (1/n) Σ_{j ∈ W(c)} a_j²)^β,   W(c) = [c − ⌊n/2⌋, c + ⌊(n−1)/2⌋] ∩ [0, C)

It computes the window mean with ``avg_pool3d`` over a zero-padded ``(N, 1, C, H, W)`` view of the squares.
ATen's CPU kernel walks that view one output element at a time, and its backward one gradient element at
a time; in one global iteration of CSE-FSL's CIFAR-10 scenario the two took 27 % of the CPU time
(torch.profiler, benchmarks/RESULTS.md). :class:`LocalResponseNorm` keeps every other operation of
``F.local_response_norm`` and replaces only that pooling by :class:`_ChannelWindowMean`, which adds whole
shifted planes instead. The numbers are the same bits, because the additions are the same:

* **forward**: the kernel sets ``sum = 0`` and adds the window's padded elements in ascending channel
  order, then divides by ``n`` in the input's float type. The shifted-plane sum starts from the first
  padded slice (``0 + x = x``), adds the others in the same order and divides by ``n`` the same way.
* **backward**: the kernel zero-fills the input gradient, then for each output channel in ascending order
  adds ``g / n`` to every element of its window. Element ``p`` so receives ``g[p − n + 1] / n`` first and
  ``g[p] / n`` last; the shifted-plane backward adds the shifts from the largest to the smallest, the
  same order.

Only float32 and float64 CPU inputs of 4 or more dimensions, contiguous and not empty, take the new path:
that is where the kernel sums in the input's own type (its ``opmath`` type) and walks the layout above.
Other inputs (3-D, another dtype or device, a strided view) run ``nn.LocalResponseNorm``'s own forward.
``tests/unit/models/test_normalization.py`` checks the equalities, for window sizes 1 to 7, NaN and
infinity included; ``benchmarks/local_response_norm.py`` times both.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class _ChannelWindowMean(torch.autograd.Function):
    """``avg_pool3d(pad(s, (0, 0, 0, 0, ⌊n/2⌋, ⌊(n−1)/2⌋)), (n, 1, 1), 1)`` of ``s`` (N, 1, C, H, W)."""

    generate_vmap_rule = True  # torch.func.vmap runs forward and backward per sample

    @staticmethod
    def forward(squares: torch.Tensor, size: int) -> torch.Tensor:
        return channel_window_mean(squares, size)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        """Keep the window size and channel count (a step of its own, so ``torch.func`` can transform it)."""
        squares, size = inputs
        ctx.size, ctx.channels = size, squares.shape[2]

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor, None]:
        size, channels = ctx.size, ctx.channels
        share = grad_out.contiguous() / size  # the kernel's grad_delta = grad_output / divide_factor
        n, one, _, *rest = share.shape
        padded = share.new_zeros(n, one, channels + size - 1, *rest)
        for shift in reversed(range(size)):  # ascending output channel for every input element
            padded[:, :, shift : shift + channels] += share
        first = size // 2
        return padded[:, :, first : first + channels], None


def channel_window_mean(squares: torch.Tensor, size: int) -> torch.Tensor:
    """The window means of ``squares`` (N, 1, C, ...), as ``F.local_response_norm``'s ``avg_pool3d`` has them.

    Zero-pads ⌊n/2⌋ channels before and ⌊(n−1)/2⌋ after, adds the ``size`` shifted slices in ascending
    order starting from the first, and divides by ``size``; the module docstring says why each element is
    the kernel's bits.
    """
    n, one, channels, *rest = squares.shape
    first = size // 2
    padded = squares.new_zeros(n, one, channels + size - 1, *rest)
    padded[:, :, first : first + channels] = squares
    total = padded[:, :, :channels].clone()
    for shift in range(1, size):
        total += padded[:, :, shift : shift + channels]
    return total.div_(size)


def window_sum_applies(x: torch.Tensor) -> bool:
    """Whether :class:`LocalResponseNorm` sums ``x``'s windows by shifted planes (module docstring)."""
    return (
        x.device.type == "cpu"
        and x.dim() >= 4
        and x.dtype in (torch.float32, torch.float64)
        and x.numel() > 0
        and x.is_contiguous()
    )


class LocalResponseNorm(nn.LocalResponseNorm):
    """``nn.LocalResponseNorm`` with the same outputs and gradients, faster on contiguous CPU inputs.

    A drop-in replacement (the same constructor, no parameters or buffers, ``isinstance`` of
    ``nn.LocalResponseNorm``); the module docstring says why the numbers are the same bit for bit.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``nn.LocalResponseNorm.forward(x)``: the same operations, the window mean by shifted planes."""
        if not window_sum_applies(x):
            return super().forward(x)
        sizes = x.size()
        squares = x.mul(x).view(sizes[0], 1, sizes[1], sizes[2], -1)
        mean = _ChannelWindowMean.apply(squares, self.size).view(sizes)
        return x / mean.mul(self.alpha).add(self.k).pow(self.beta)


__all__ = ["LocalResponseNorm", "channel_window_mean", "window_sum_applies"]
