"""Helpers for server logic that runs on an accelerator (see docs/architecture.md, "What runs where").

A server keeps its models and every tensor derived from received data on its ``device`` and takes its
decisions on CPU-side copies of small values (labels, counts, weights), so that a call never waits for the
device except for the gradient it returns. These helpers create the device-side pieces.
"""

from __future__ import annotations

import torch


def loss_zero(device: torch.device | str) -> torch.Tensor:
    """A float64 zero on ``device``: the running sum of a server's training losses.

    Kept on the server's device, the sum grows without a device read per step (``float(loss)`` would
    wait for the GPU); it is read once per evaluation. float64 adds the float32 losses exactly as the
    Python float it replaces did, so CPU results are unchanged.
    """
    return torch.zeros((), dtype=torch.float64, device=device)


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
