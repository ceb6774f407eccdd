"""FedASMU's small models: LeNet5 and the CNN of its Table 2 (FedASMU spec §4.2).

FedASMU trains whole models (federated learning, not split learning); the named cuts exist because the engine
treats every model as client part + server part, and an FL algorithm trains ``client`` then ``server``.
"""

from __future__ import annotations

import math

from torch import nn

from raysfl.models.config import ModelConfig
from raysfl.models.pooling import MaxPool2d
from raysfl.models.split import LayerStack


def lenet5(cfg: ModelConfig, in_channels: int, image_size: int, num_classes: int) -> LayerStack:
    """LeNet5 (LeCun et al.) with ReLU and max pooling [A]; cuts ``conv1`` and ``conv2`` (default).

    Conv(C→6, k5), ReLU, MaxPool(2), Conv(6→16, k5), ReLU, MaxPool(2), flatten, Linear(→120), ReLU,
    Linear(120→84), ReLU, Linear(84→M). LeNet5 reads 32×32 images; smaller ones (28×28 MNIST/FMNIST) are
    zero-padded up to 32 by the first conv (padding 2), so the flatten is 16·5·5 = 400 on both:
    62,006 parameters on CIFAR-10 and 61,706 on FMNIST.
    """
    del cfg
    s = LayerStack((in_channels, image_size, image_size))
    s.add("conv1", nn.Conv2d(in_channels, 6, kernel_size=5, padding=max(0, (32 - image_size) // 2)))
    s.add("relu1", nn.ReLU())
    s.add("pool1", MaxPool2d(kernel_size=2, stride=2))
    s.cut("conv1")
    s.add("conv2", nn.Conv2d(6, 16, kernel_size=5))
    s.add("relu2", nn.ReLU())
    s.add("pool2", MaxPool2d(kernel_size=2, stride=2))
    s.cut("conv2")
    s.add("flatten", nn.Flatten())
    s.add("fc1", nn.Linear(math.prod(s.shape), 120))
    s.add("relu3", nn.ReLU())
    s.add("fc2", nn.Linear(120, 84))
    s.add("relu4", nn.ReLU())
    s.add("fc3", nn.Linear(84, num_classes))
    return s


def fedasmu_cnn(cfg: ModelConfig, in_channels: int, image_size: int, num_classes: int) -> LayerStack:
    """The CNN of FedASMU Table 2: Conv(→64, k2), ReLU, Conv(64→32, k2), ReLU, flatten, Linear(→M).

    Stride 1, no padding and ReLU are [A] (FedASMU spec A17): on 3×32×32 the maps are 64×31×31 and 32×30×30
    and the model has 832 + 8,224 + 288,010 = 297,066 parameters. Cuts ``conv1`` and ``conv2`` (default).
    """
    del cfg
    s = LayerStack((in_channels, image_size, image_size))
    s.add("conv1", nn.Conv2d(in_channels, 64, kernel_size=2))
    s.add("relu1", nn.ReLU())
    s.cut("conv1")
    s.add("conv2", nn.Conv2d(64, 32, kernel_size=2))
    s.add("relu2", nn.ReLU())
    s.cut("conv2")
    s.add("flatten", nn.Flatten())
    s.add("dense1", nn.Linear(math.prod(s.shape), num_classes))
    return s
