"""Max pooling of NCHW feature maps: ``nn.MaxPool2d`` against :class:`raysfl.models.pooling.MaxPool2d`.

Times ATen's NCHW kernel (``nn.MaxPool2d``) and the channels-last route of :mod:`raysfl.models.pooling`
on the shapes the default scenario (AlexNet on Fashion-MNIST) gives the pooling layers, and on a few
smaller ones (LeNet-5, the last VGG pool, tiny maps) that show where :func:`channels_last_pays` draws its
line: a forward without gradients (evaluation, the clients' first forward) and a forward + backward
(training), best of ``--repeats`` timings, with the run's thread count. Both compute the same values,
indices and gradients (``tests/unit/models/test_pooling.py``); the last column is the route raysfl's
``MaxPool2d`` takes.

Usage::

    python benchmarks/maxpool_layout.py [--threads 2] [--repeats 5]
"""

from __future__ import annotations

import torch
from _layer_timing import layer_benchmark_args, side_by_side_cells
from torch import nn

from raysfl.models.pooling import channels_last_max_pool2d, channels_last_pays

# (layer, pass, N, C, H, W, kernel, stride): AlexNet split L2 on 1x28x28 inputs, then smaller maps
CASES = (
    ("pool1", "training batch", 32, 32, 28, 28, 2, 2),
    ("pool2", "training batch", 32, 64, 14, 14, 2, 2),
    ("pool5", "training batch", 32, 256, 7, 7, 3, 2),
    ("pool5", "server update (buffer + generated)", 576, 256, 7, 7, 3, 2),
    ("pool1", "evaluation chunk", 64, 32, 28, 28, 2, 2),
    ("pool2", "evaluation chunk", 64, 64, 14, 14, 2, 2),
    ("pool5", "evaluation chunk", 64, 256, 7, 7, 3, 2),
    ("lenet5 pool1", "training batch", 32, 6, 28, 28, 2, 2),
    ("3 channels", "training batch", 32, 3, 32, 32, 2, 2),
    ("vgg pool5", "training batch", 32, 512, 2, 2, 2, 2),
    ("tiny map", "training batch", 32, 16, 8, 8, 2, 2),
)


class ChannelsLast(nn.Module):
    """The channels-last route whatever the input (for timing; ``MaxPool2d`` uses it only where it pays)."""

    def __init__(self, kernel: int, stride: int) -> None:
        super().__init__()
        self.geometry = ([kernel, kernel], [stride, stride], [0, 0], [1, 1], False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return channels_last_max_pool2d(x, *self.geometry)


def main() -> None:
    args = layer_benchmark_args(__doc__)
    print(
        "\n| layer | pass | input (N×C×H×W) | forward: NCHW | forward: channels-last | × "
        "| fwd+bwd: NCHW | fwd+bwd: channels-last | × | MaxPool2d takes |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    for layer, what, n, c, h, w, k, s in CASES:
        x = torch.randn(n, c, h, w)
        route = "channels-last" if channels_last_pays(x) else "NCHW"
        cells = side_by_side_cells(nn.MaxPool2d(k, s), ChannelsLast(k, s), x, args.repeats)
        print(f"| {layer} k{k}s{s} | {what} | {n}×{c}×{h}×{w} | {cells} | {route} |")


if __name__ == "__main__":
    main()
