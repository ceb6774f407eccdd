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

import argparse

import torch
from _layer_timing import forward_ms, train_ms
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
    ("lenet5 pool1", "training batch", 32, 6, 24, 24, 2, 2),
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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {args.threads} thread(s), best of {args.repeats}, ms per call\n")
    print(
        "| layer | pass | input (N×C×H×W) | forward: NCHW | forward: channels-last | × "
        "| fwd+bwd: NCHW | fwd+bwd: channels-last | × | MaxPool2d takes |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    for layer, what, n, c, h, w, k, s in CASES:
        x = torch.randn(n, c, h, w)
        ref, new = nn.MaxPool2d(k, s), ChannelsLast(k, s)
        route = "channels-last" if channels_last_pays(x) else "NCHW"
        f_ref, f_new = forward_ms(ref, x, args.repeats), forward_ms(new, x, args.repeats)
        t_ref, t_new = train_ms(ref, x, args.repeats), train_ms(new, x, args.repeats)
        print(
            f"| {layer} k{k}s{s} | {what} | {n}×{c}×{h}×{w} | {f_ref:.3f} | {f_new:.3f} "
            f"| {f_ref / f_new:.1f} | {t_ref:.3f} | {t_new:.3f} | {t_ref / t_new:.1f} | {route} |"
        )


if __name__ == "__main__":
    main()
