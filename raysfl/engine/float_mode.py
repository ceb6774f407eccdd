"""Subnormal floats in a run's torch work: IEEE arithmetic or flushed to zero (``engine.flush_denormal``).

On x86 CPUs an arithmetic operation with a subnormal operand or result (|x| < 2⁻¹²⁶ ≈ 1.2·10⁻³⁸ in float32)
takes a slow microcode path. A client job whose activations or gradients drift into that range runs several
times slower with no other change: one FedAvg job of the peer benchmark's 10 rounds took 9.4 s of CPU
instead of 1.8 s (benchmarks/RESULTS.md, "Subnormal floats"). With flushing on, the CPU reads subnormal
operands as zero and writes zero for subnormal results (the MXCSR's DAZ and FTZ bits,
``torch.set_flush_denormal``), at full speed; a number changes only where a subnormal value would have
made a difference to it.

The mode is a per-thread register. It is switched on around every call a host runs (:func:`flushed`) and
off again, so the coordinator's own arithmetic (in the driver on Ray, in the same thread on the local
backend) never runs flushed, and it covers the thread that runs the call: all of a call's torch work
with one torch thread (``engine.torch_threads = 1``, the default of the client pools). torch's worker
threads, which a thread count above 1 adds, inherit the register from the thread that starts them; the
hosts start them before any flushed call (:func:`start_workers`), so they keep IEEE arithmetic on both
backends, and a run gives the same numbers in one process as on Ray. GPU kernels are unaffected.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from raysfl.config import ConfigError

SUBNORMAL = 1e-39
"""A float32 subnormal (between the smallest subnormal, 1.4·10⁻⁴⁵, and the smallest normal, 1.2·10⁻³⁸)."""

_WORKER_ROWS = 1 << 20  # large enough that torch splits an elementwise op over every thread


def flushing() -> bool:
    """Whether the calling thread flushes subnormals to zero now (reads the mode, changes nothing)."""
    return bool(torch.tensor([SUBNORMAL]).mul(1.0).item() == 0.0)


def start_workers(threads: int) -> None:
    """Start torch's worker threads for ``threads`` threads now, with the calling thread's current mode.

    A worker thread copies the floating-point mode of the thread that starts it and keeps it; starting them
    before any flushed call (the mode off) keeps every worker on IEEE arithmetic.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    torch.ones(_WORKER_ROWS).mul_(1.0)
    torch.set_num_threads(previous)


def check_supported(on: bool) -> None:
    """Refuse ``engine.flush_denormal = true`` before a run starts, where this CPU cannot flush.

    Raises:
        ConfigError: ``on`` and ``torch.set_flush_denormal`` cannot turn flushing on here.
    """
    if not on:
        return
    before = flushing()
    supported = torch.set_flush_denormal(True)
    torch.set_flush_denormal(before)
    if not supported:
        raise ConfigError(
            [
                "engine.flush_denormal: true is not possible on this CPU (torch cannot flush subnormal "
                "floats to zero here); set it to false"
            ]
        )


@contextmanager
def flushed(on: bool) -> Iterator[None]:
    """Run the enclosed torch work with subnormals flushed to zero in the calling thread (when ``on``).

    The calling thread's earlier mode is restored on exit. ``on = False`` changes nothing. Raises
    ``RuntimeError`` where the CPU cannot flush (``torch.set_flush_denormal`` returns False there: x86
    without DAZ, or another architecture torch does not support).
    """
    if not on:
        yield
        return
    before = flushing()
    if not torch.set_flush_denormal(True):
        raise RuntimeError(
            "engine.flush_denormal = true: this CPU cannot flush subnormal floats to zero "
            "(torch.set_flush_denormal returned False); set engine.flush_denormal = false"
        )
    try:
        yield
    finally:
        torch.set_flush_denormal(before)
