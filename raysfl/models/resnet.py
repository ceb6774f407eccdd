"""Residual networks: ResNet18 of GAS (Table 5) and ResNet20 of FedASMU.

Both are stacks of stages of :class:`BasicBlock` (He et al. 2016); the stack is cut between stages, so a split
never falls inside a residual connection.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from raysfl.models.config import ModelConfig
from raysfl.models.pooling import MaxPool2d
from raysfl.models.split import LayerStack


class BasicBlock(nn.Module):
    """Two 3×3 conv + BatchNorm layers with a residual connection, then ReLU.

    ``shortcut`` selects the connection when the shape changes: ``"projection"`` (1×1 conv + BatchNorm, He
    et al. option B, used by ResNet18) or ``"pad"`` (stride-2 subsampling and zero channels, option A,
    parameter-free, used by the CIFAR ResNet20).
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int, shortcut: str) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.stride = stride
        self.extra_channels = out_channels - in_channels
        self.project: nn.Module | None = None
        reshapes = stride != 1 or in_channels != out_channels
        if reshapes and shortcut == "projection":
            self.project = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )
        self.pad = reshapes and shortcut == "pad"

    def _shortcut(self, x: torch.Tensor) -> torch.Tensor:
        if self.project is not None:
            return self.project(x)
        if self.pad:
            x = x[:, :, :: self.stride, :: self.stride]
            return F.pad(x, (0, 0, 0, 0, 0, self.extra_channels))
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Residual block output ``relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))``."""
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self._shortcut(x))


def make_stage(in_channels: int, out_channels: int, blocks: int, stride: int, shortcut: str) -> nn.Sequential:
    """``blocks`` basic blocks; the first one changes the width and applies ``stride``."""
    layers = [BasicBlock(in_channels, out_channels, stride, shortcut)]
    layers += [BasicBlock(out_channels, out_channels, 1, shortcut) for _ in range(blocks - 1)]
    return nn.Sequential(*layers)


def _add_head(s: LayerStack, num_classes: int) -> None:
    s.add("avgpool", nn.AdaptiveAvgPool2d(1))
    s.add("flatten", nn.Flatten())
    s.add("fc", nn.Linear(math.prod(s.shape), num_classes))


def resnet18(cfg: ModelConfig, in_channels: int, image_size: int, num_classes: int) -> LayerStack:
    """ResNet18 with cuts ``layer1`` (default [P]), ``layer2`` and ``layer3`` after its residual stages.

    GAS App. H: "split after the first residual layer", read as the first residual stage ``layer1`` (two
    blocks; torchvision's name for it) [A]: no cut after its first block is offered.

    Stages 64/128/256/512 with two blocks each and projection shortcuts. The stem is an option [A]
    (``resnet18_stem``): ``"imagenet"`` (7×7/2 conv, BatchNorm, ReLU, 3×3/2 max pool; activation 64×8×8 on
    CIFAR) or ``"cifar"`` (3×3/1 conv, BatchNorm, ReLU; activation 64×32×32). GAS fits a full d×d covariance
    per label to the activation (GAS spec §10.5); the CIFAR stem gives d = 65,536 (17 GB per label), the
    ImageNet stem d = 4,096 like AlexNet L2, hence the default.
    """
    s = LayerStack((in_channels, image_size, image_size))
    if cfg.resnet18_stem == "imagenet":
        s.add("conv1", nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False))
    else:
        s.add("conv1", nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False))
    s.add("bn1", nn.BatchNorm2d(64))
    s.add("relu", nn.ReLU())
    if cfg.resnet18_stem == "imagenet":
        s.add("maxpool", MaxPool2d(kernel_size=3, stride=2, padding=1))
    s.add("layer1", make_stage(64, 64, 2, 1, "projection"))
    s.cut("layer1")
    s.add("layer2", make_stage(64, 128, 2, 2, "projection"))
    s.cut("layer2")
    s.add("layer3", make_stage(128, 256, 2, 2, "projection"))
    s.cut("layer3")
    s.add("layer4", make_stage(256, 512, 2, 2, "projection"))
    _add_head(s, num_classes)
    return s


def resnet20(cfg: ModelConfig, in_channels: int, image_size: int, num_classes: int) -> LayerStack:
    """CIFAR ResNet20 of He et al. (3 stages of 3 blocks, 16/32/64 wide, option-A shortcuts), FedASMU §4.2.

    FedASMU names the model without details (FedASMU spec A18); this is the standard CIFAR variant [A],
    0.27M parameters. Cuts ``stage1`` (default [A]) and ``stage2`` fall between the stages.
    """
    del cfg
    s = LayerStack((in_channels, image_size, image_size))
    s.add("conv1", nn.Conv2d(in_channels, 16, kernel_size=3, padding=1, bias=False))
    s.add("bn1", nn.BatchNorm2d(16))
    s.add("relu", nn.ReLU())
    s.add("stage1", make_stage(16, 16, 3, 1, "pad"))
    s.cut("stage1")
    s.add("stage2", make_stage(16, 32, 3, 2, "pad"))
    s.cut("stage2")
    s.add("stage3", make_stage(32, 64, 3, 2, "pad"))
    _add_head(s, num_classes)
    return s
