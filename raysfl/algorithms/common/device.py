"""Helpers for server logic that runs on an accelerator (see docs/architecture.md, "What runs where").

A server keeps its models and every tensor derived from received data on its ``device`` and takes its
decisions on CPU-side copies of small values (labels, counts, weights), so that a call never waits for the
device except for the gradient it returns. These helpers create the device-side pieces.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn


def loss_zero(device: torch.device | str) -> torch.Tensor:
    """A float64 zero on ``device``: the running sum of a server's training losses.

    Kept on the server's device, the sum grows without a device read per step (``float(loss)`` would
    wait for the GPU); it is read once per evaluation. float64 adds the float32 losses exactly as the
    Python float it replaces did, so CPU results are unchanged.
    """
    return torch.zeros((), dtype=torch.float64, device=device)


def mean_training_loss(total: torch.Tensor, count: int) -> float | None:
    """The mean of a server's ``count`` training losses summed in ``total`` (one read of the device value).

    None when no server step ran since the last evaluation: no mean exists, and 0.0 would read as a perfect
    loss (metrics.parquet stores a null, TensorBoard skips it).
    """
    return float(total) / count if count else None


def device_generator(device: torch.device | str, seed: int) -> torch.Generator:
    """A random generator on ``device`` seeded with ``seed``, so draws happen where they are used.

    On the CPU this is ``torch.Generator().manual_seed(seed)``: the same stream as before. A device type
    without generators of its own (``meta``, used by the placement tests) gets a CPU generator, which
    torch accepts for factory calls on such devices.
    """
    try:
        gen = torch.Generator(device=device)
    except RuntimeError:
        gen = torch.Generator()
    return gen.manual_seed(seed)


def to_device(t: torch.Tensor, device: torch.device | str, copy: bool = False) -> torch.Tensor:
    """``t`` on ``device``, the host-to-device copy queued without a stream synchronisation.

    ``non_blocking=True``: torch does not synchronise the stream (a plain ``.to`` does, and so waits for every
    kernel already queued); from pageable host memory CUDA copies the bytes to a staging buffer before the
    call returns, so the source may be freed or reused at once (the driver may still wait where it must
    stage; pinned memory would make the copy fully asynchronous). From and to the CPU it is
    ``t.to(device, copy=copy)``: the same tensor, the same values. Not for device-to-host copies: a value
    read on the host must wait for the device.
    """
    return t.to(device, non_blocking=True, copy=copy)


@torch.no_grad()
def load_into(module: nn.Module, state: Mapping[str, torch.Tensor], strict: bool = True) -> None:
    """Copy ``state`` into ``module``'s parameters and buffers in place, like ``load_state_dict``.

    The host-to-device copies are queued without a stream synchronisation (:func:`to_device`);
    ``load_state_dict`` synchronises once per tensor. ``strict``: the keys must be exactly the module's;
    otherwise keys the module lacks are ignored and missing ones keep their values. Shapes must match
    either way.
    """
    own = module.state_dict(keep_vars=True)
    if strict and own.keys() != state.keys():
        missing, unexpected = sorted(own.keys() - state.keys()), sorted(state.keys() - own.keys())
        raise RuntimeError(
            f"state does not fit {type(module).__name__}: missing {missing}, unexpected {unexpected}"
        )
    for name, value in state.items():
        target = own.get(name)
        if target is None:
            continue
        if target.shape != value.shape:
            raise RuntimeError(
                f"state[{name!r}] has shape {tuple(value.shape)}; {type(module).__name__} holds "
                f"{tuple(target.shape)}"
            )
        target.copy_(value, non_blocking=True)
