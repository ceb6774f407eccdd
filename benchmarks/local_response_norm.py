"""Local response normalisation: torch's ``nn.LocalResponseNorm`` against raysfl's ``LocalResponseNorm``.

Times torch's layer (its window mean is ``avg_pool3d``, computed one element at a time) and raysfl's (the
same operations, the window mean summed by shifted channel planes) on the shapes CSE-FSL's CIFAR-10
network gives its two LRN layers (24×24 crops: 64×12×12 maps) for a training batch of 50 and an evaluation
chunk of 64 rows, and on a wider and a narrower map: a forward without gradients and a forward + backward,
best of ``--repeats`` timings, with the run's thread count. Both compute the same bits
(``tests/unit/models/test_normalization.py``).

Usage::

    python benchmarks/local_response_norm.py [--threads 2] [--repeats 5]
"""

from __future__ import annotations

import torch
from _layer_timing import layer_benchmark_args, side_by_side_cells
from torch import nn

from raysfl.models.normalization import LocalResponseNorm

# (where, N, C, H, W): CSE-FSL's CIFAR-10 client (lrn1 after pool1, lrn2 after relu2), then other maps
CASES = (
    ("CSE-FSL lrn1 / lrn2, training batch", 50, 64, 12, 12),
    ("CSE-FSL lrn1 / lrn2, evaluation chunk", 64, 64, 12, 12),
    ("wide map (AlexNet-like conv1)", 32, 96, 27, 27),
    ("few channels", 32, 8, 24, 24),
)
SIZE, ALPHA, BETA, K = 4, 0.001 / 9.0, 0.75, 1.0  # CSE-FSL's layer (CSE-FSL spec §4.2)


def main() -> None:
    args = layer_benchmark_args(__doc__)
    print(f"LocalResponseNorm(size={SIZE}, alpha={ALPHA:.3g}, beta={BETA}, k={K})\n")
    print(
        "| maps | input (N×C×H×W) | forward: torch | forward: raysfl | × "
        "| fwd+bwd: torch | fwd+bwd: raysfl | × |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    ref, new = nn.LocalResponseNorm(SIZE, ALPHA, BETA, K), LocalResponseNorm(SIZE, ALPHA, BETA, K)
    for where, n, c, h, w in CASES:
        cells = side_by_side_cells(ref, new, torch.randn(n, c, h, w), args.repeats)
        print(f"| {where} | {n}×{c}×{h}×{w} | {cells} |")


if __name__ == "__main__":
    main()
