"""Max pooling that computes on the CPU in channels-last order and returns exactly what ``nn.MaxPool2d`` does.

ATen's CPU max-pooling kernel for NCHW-contiguous feature maps walks each plane one output at a time with
a data-dependent branch per window element; its channels-last kernel compares whole vectors of channels.
On the 2-core development machine (AMD EPYC, torch 2.13.0+cpu) the NCHW forward took 1.69 ms for a batch
of 32 AlexNet ``pool1`` inputs (32 × 32 × 28 × 28) against 0.27 ms through the channels-last kernel, copies
included (``benchmarks/maxpool_layout.py``, benchmarks/RESULTS.md). In one global iteration of
``scenarios/default.toml`` on the local backend the pooling layers took about a sixth of the time.

:class:`MaxPool2d` therefore hands a contiguous 4-D CPU input, large enough to gain, to the channels-last
kernel and gives the result back in the input's layout. Nothing else changes, bit for bit:

* **values and indices**: both kernels visit a window in the same raster order and keep an element when
  ``val > max or isnan(val)``, so each output is the same element (the first maximum, or the last NaN),
  and its index (``h·W + w`` within the plane) does not depend on the layout;
* **gradients**: the backward is ATen's NCHW backward, called with the NCHW input, the NCHW-ordered
  indices and the incoming gradient made contiguous, exactly the call autograd makes for
  ``nn.MaxPool2d``, so every input gradient is summed in the same order.

Other inputs (already channels-last, fewer than :data:`MIN_CHANNELS` channels or :data:`MIN_ELEMENTS`
elements, 3-D, not float32, float64 or bfloat16, on another device, or ``return_indices=True``) take
``nn.MaxPool2d``'s own path. ``tests/unit/models/test_pooling.py`` checks the equalities, ties and NaNs
included, and that the fast path runs.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

_CL = torch.channels_last


class _ChannelsLastMaxPool(torch.autograd.Function):
    """``max_pool2d`` forward through the channels-last kernel; backward through the NCHW one.

    The forward returns the values and the NCHW-ordered indices (not differentiable); the context is set
    in :meth:`setup_context`, a step of its own, so ``torch.func.grad`` and its relatives take the Function
    as they take ``nn.MaxPool2d`` (under ``vmap`` :func:`channels_last_pays` keeps ``nn.MaxPool2d``'s path).
    """

    generate_vmap_rule = True  # vmap(grad(f)): the grad level lets it through, vmap runs it per sample

    @staticmethod
    def forward(x: torch.Tensor, *geometry: Any) -> tuple[torch.Tensor, torch.Tensor]:
        with contextlib.suppress(RuntimeError):  # per sample under vmap (of grad), no other layouts: NCHW
            x = x.contiguous(memory_format=_CL)
        out, indices = torch.ops.aten.max_pool2d_with_indices(x, *geometry)
        return out.contiguous(), indices.contiguous()

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, torch.Tensor]) -> None:
        """Keep the NCHW input, the indices and the geometry for the backward."""
        x, *geometry = inputs
        indices = output[1]
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(x, indices)
        ctx.geometry = geometry

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor, _: Any) -> tuple[torch.Tensor | None, ...]:
        x, indices = ctx.saved_tensors
        kernel, stride, padding, dilation, ceil_mode = ctx.geometry
        grad_x = torch.ops.aten.max_pool2d_with_indices_backward(
            grad_out.contiguous(), x, kernel, stride, padding, dilation, ceil_mode, indices
        )
        return (grad_x, None, None, None, None, None)


def _pair(v: int | tuple[int, ...]) -> list[int]:
    return [v, v] if isinstance(v, int) else list(v)


MIN_CHANNELS = 16
"""Fewest channels for the channels-last kernel: it compares a vector of channels at a time (16 floats with
AVX-512) and pools fewer channels element by element, slower than the NCHW kernel for LeNet-5's 6
channels and for 3 (``benchmarks/maxpool_layout.py``, benchmarks/RESULTS.md)."""

MIN_ELEMENTS = 1 << 16
"""Fewest input elements for the channels-last kernel: below, the two layout copies cost more than the
kernel saves (32 × 16 × 8 × 8 was slower that way; 32 × 512 × 2 × 2, 65,536 elements, 1.8× faster)."""


def channels_last_pays(x: torch.Tensor) -> bool:
    """Whether :class:`MaxPool2d` sends ``x`` through the channels-last kernel (see the module docstring)."""
    return (
        x.device.type == "cpu"
        and x.dim() == 4
        and x.dtype in (torch.float32, torch.float64, torch.bfloat16)
        and x.size(1) >= MIN_CHANNELS
        and x.numel() >= MIN_ELEMENTS
        and x.is_contiguous()
        and not _also_channels_last(x)
    )


def _also_channels_last(x: torch.Tensor) -> bool:
    """Whether ``x`` is channels-last contiguous too (e.g. H = W = 1: both layouts at once).

    Inside ``torch.func.vmap`` torch cannot tell (it raises); that counts as yes, so a vmapped pooling
    keeps ``nn.MaxPool2d``'s own path.
    """
    try:
        return x.is_contiguous(memory_format=_CL)
    except RuntimeError:
        return True


def channels_last_max_pool2d(x: torch.Tensor, *geometry: Any) -> torch.Tensor:
    """``F.max_pool2d(x, *geometry)`` of an NCHW-contiguous CPU ``x`` through the channels-last kernel.

    Returned NCHW-contiguous; :class:`MaxPool2d` calls it where :func:`channels_last_pays`. ``geometry``:
    kernel, stride, padding and dilation as lists of two ints, then ``ceil_mode``.
    """
    if torch.is_grad_enabled() and x.requires_grad:
        return _ChannelsLastMaxPool.apply(x, *geometry)[0]
    return F.max_pool2d(x.contiguous(memory_format=_CL), *geometry).contiguous()  # no indices needed


class MaxPool2d(nn.MaxPool2d):
    """``nn.MaxPool2d`` with the same outputs, indices and gradients, faster on NCHW CPU inputs.

    A drop-in replacement (the same constructor, no parameters or buffers, ``isinstance`` of
    ``nn.MaxPool2d``); see the module docstring for why the numbers are the same bit for bit.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``nn.MaxPool2d.forward(x)``; NCHW CPU inputs go through the channels-last kernel."""
        if self.return_indices or not channels_last_pays(x):
            return super().forward(x)
        geometry = (  # nn.MaxPool2d has set stride = kernel_size when none was given
            _pair(self.kernel_size),
            _pair(self.stride),
            _pair(self.padding),
            _pair(self.dilation),
            bool(self.ceil_mode),
        )
        return channels_last_max_pool2d(x, *geometry)
