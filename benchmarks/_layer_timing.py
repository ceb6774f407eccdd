"""Timing helpers for the layer benchmarks (``maxpool_layout.py``, ``local_response_norm.py``)."""

from __future__ import annotations

import argparse
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


def layer_benchmark_args(doc: str) -> argparse.Namespace:
    """Parse ``--threads`` (2) and ``--repeats`` (5); set the threads and the seed, and print them."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {args.threads} thread(s), best of {args.repeats}, ms per call")
    return args


def side_by_side_cells(ref: nn.Module, new: nn.Module, x: torch.Tensor, repeats: int) -> str:
    """Markdown cells: ``ref``'s and ``new``'s forward ms and their ratio, then the same with the backward."""
    f_ref, f_new = forward_ms(ref, x, repeats), forward_ms(new, x, repeats)
    t_ref, t_new = train_ms(ref, x, repeats), train_ms(new, x, repeats)
    forward = f"{f_ref:.3f} | {f_new:.3f} | {f_ref / f_new:.1f}"
    return f"{forward} | {t_ref:.3f} | {t_new:.3f} | {t_ref / t_new:.1f}"
