"""Random layers (dropout) draw from the caller's own stream, not from the process that runs the call.

``nn.Dropout`` and its relatives draw their masks from torch's process-global generator. A client pool is
one process serving many virtual clients, so a client whose model has such a layer would otherwise get masks
that depend on which pool it runs in and on what that pool ran before: the same scenario and seed would give
other numbers on 1 pool than on 3, or in-process than on Ray (DESIGN property 3). :func:`seeded` runs a block
with the global generator seeded from the owner's stream and restores it after; :func:`draws_randomness`
says whether a model needs it, so models without random layers keep their streams (and numbers) unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

import torch
from torch import nn
from torch.nn.modules.dropout import _DropoutNd


def draws_randomness(model: nn.Module) -> bool:
    """Whether ``model`` in training mode draws from the global generator (a dropout with p > 0, RReLU)."""
    for m in model.modules():
        if isinstance(m, _DropoutNd) and m.p > 0:
            return True
        if isinstance(m, nn.RReLU):
            return True
    return False


@contextmanager
def seeded(generator: torch.Generator) -> Iterator[None]:
    """Run the block with the CPU RNG seeded from ``generator`` and restore it after (dropout masks).

    Draws one integer from ``generator``, so the masks follow the owner's stream whichever process runs the
    call, and leave the process's own global stream where it was.
    """
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def seeded_if(random: bool, generator: torch.Generator) -> AbstractContextManager[None]:
    """:func:`seeded` when ``random`` (the model draws masks), else nothing: no draw from ``generator``."""
    return seeded(generator) if random else nullcontext()


@contextmanager
def replaying_rng(rng_state: torch.Tensor) -> Iterator[None]:
    """Run the block with the CPU RNG at ``rng_state`` and restore the current state after.

    A split client that keeps its input batch instead of the autograd graph recomputes its forward pass for
    the backward. Saved with ``torch.get_rng_state()`` just before the first forward (inside
    :func:`seeded_if`), the state makes the recomputation draw the same dropout masks, so the gradient is
    that of the activations the client sent. A second :func:`seeded_if` block would draw a new seed from
    the client's stream, and so new masks.
    """
    with torch.random.fork_rng(devices=[]):
        torch.set_rng_state(rng_state)
        yield
