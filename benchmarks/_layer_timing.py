"""Timing helpers for the layer benchmarks (``maxpool_layout.py``, ``local_response_norm.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch import nn


def best_ms(fn: Callable[[], object], repeats: int) -> float:
    """The fastest of ``repeats`` timings of ``fn``, in ms per call (each timing at least 20 ms long)."""
    fn()
    inner = 1
    while True:  # grow the inner loop to at least 20 ms
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        if time.perf_counter() - t > 0.02:
            break
        inner *= 2
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t) / inner)
    return min(times) * 1e3


def forward_ms(layer: nn.Module, x: torch.Tensor, repeats: int) -> float:
    """``layer(x)`` without gradients (evaluation, a client's first forward)."""

    def run() -> None:
        with torch.no_grad():
            layer(x)

    return best_ms(run, repeats)


def train_ms(layer: nn.Module, x: torch.Tensor, repeats: int) -> float:
    """``layer(x)`` and its backward to ``x`` (training)."""
    leaf = x.clone().requires_grad_(True)
    grad = torch.ones_like(layer(leaf))

    def run() -> None:
        layer(leaf).backward(grad)

    return best_ms(run, repeats)
