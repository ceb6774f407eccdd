"""The CSE-FSL networks for CIFAR-10 (24×24 crops) and F-EMNIST, with one cut ``conv2`` (CSE-FSL spec §4.2).

CIFAR-10 client (107,328 params, activation 64×6×6 = 2,304 floats) [C]: Conv(3→64, k5, p2), ReLU,
MaxPool(k3, s2, p1), LRN(4, 0.001/9, 0.75, 1), Conv(64→64, k5, p2), ReLU, LRN, MaxPool(k3, s2, p1). The paper
(§VI-A) has each conv "followed by a 2×2 max-pooling and a local response norm layer": option
``cse_fsl_cifar10_pool = "paper"`` builds that, MaxPool(2) then LRN in both blocks, with the same shapes and
counts (CSE-FSL spec §2.7-10). Server (960,970): flatten, Linear(2304→384), ReLU, Linear(384→192), ReLU,
Linear(192→10).

F-EMNIST client (18,816 params, activation 64×12×12 = 9,216 floats): Conv(1→32, k3), [ReLU], Conv(32→64, k3),
[ReLU], MaxPool(2), Dropout(0.25); the ReLUs follow Reddi et al. and are absent in the authors' code
(option ``cse_fsl_femnist_relu``, CSE-FSL spec §2.7-11 [A]). Server (1,187,774): flatten, Linear(9216→128),
ReLU, Dropout(0.5), Linear(128→62).

The flatten belongs to the server so that the activation keeps its (C, H, W) shape for the CNN+MLP
auxiliary heads (:mod:`raysfl.models.heads`); it moves no data and has no parameters. Both nets output logits
(the papers' log-softmax is part of the loss).
"""

from __future__ import annotations

import math

from torch import nn

from raysfl.models.config import ModelConfig
from raysfl.models.normalization import LocalResponseNorm
from raysfl.models.pooling import MaxPool2d
from raysfl.models.split import LayerStack


def _lrn() -> nn.Module:
    return LocalResponseNorm(size=4, alpha=0.001 / 9.0, beta=0.75, k=1.0)


def cse_fsl_cifar10(cfg: ModelConfig, in_channels: int, image_size: int, num_classes: int) -> LayerStack:
    """CSE-FSL's CIFAR-10 network; the cut ``conv2`` follows the second conv block (CSE-FSL spec §4.2).

    ``cfg.cse_fsl_cifar10_pool`` picks the pooling: the authors' code (3×3 windows of stride 2, LRN before the
    second pool) or the paper's text (2×2 windows, each pool followed by LRN).
    """
    paper = cfg.cse_fsl_cifar10_pool == "paper"

    def pool() -> nn.Module:
        return MaxPool2d(kernel_size=2, stride=2) if paper else MaxPool2d(kernel_size=3, stride=2, padding=1)

    s = LayerStack((in_channels, image_size, image_size))
    s.add("conv1", nn.Conv2d(in_channels, 64, kernel_size=5, padding=2))
    s.add("relu1", nn.ReLU())
    s.add("pool1", pool())
    s.add("lrn1", _lrn())
    s.add("conv2", nn.Conv2d(64, 64, kernel_size=5, padding=2))
    s.add("relu2", nn.ReLU())
    if paper:
        s.add("pool2", pool())
        s.add("lrn2", _lrn())
    else:
        s.add("lrn2", _lrn())
        s.add("pool2", pool())
    s.cut("conv2")
    s.add("flatten", nn.Flatten())
    s.add("fc1", nn.Linear(math.prod(s.shape), 384))
    s.add("relu3", nn.ReLU())
    s.add("fc2", nn.Linear(384, 192))
    s.add("relu4", nn.ReLU())
    s.add("fc3", nn.Linear(192, num_classes))
    return s


def cse_fsl_femnist(cfg: ModelConfig, in_channels: int, image_size: int, num_classes: int) -> LayerStack:
    """CSE-FSL's F-EMNIST network (Reddi et al.); the cut ``conv2`` follows conv-conv-pool-dropout."""
    s = LayerStack((in_channels, image_size, image_size))
    s.add("conv1", nn.Conv2d(in_channels, 32, kernel_size=3))
    if cfg.cse_fsl_femnist_relu:
        s.add("relu1", nn.ReLU())
    s.add("conv2", nn.Conv2d(32, 64, kernel_size=3))
    if cfg.cse_fsl_femnist_relu:
        s.add("relu2", nn.ReLU())
    s.add("pool", MaxPool2d(kernel_size=2, stride=2))
    s.add("drop1", nn.Dropout(0.25))
    s.cut("conv2")
    s.add("flatten", nn.Flatten())
    s.add("fc1", nn.Linear(math.prod(s.shape), 128))
    s.add("relu3", nn.ReLU())
    s.add("drop2", nn.Dropout(0.5))
    s.add("fc2", nn.Linear(128, num_classes))
    return s
