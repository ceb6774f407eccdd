"""The AlexNet-like network of GAS, with its four split points (GAS spec §10.9).

Fourteen "layers" in the reference order; there is no ReLU after conv3 and conv4, none between the Linear
layers, and no BatchNorm or dropout [C]:

====  =========================  ==========================================
 #    layer                      cut
====  =========================  ==========================================
 1    Conv(C→32, k3, p1)
 2    MaxPool(2, 2)
 3    ReLU                       L1: 32×16×16 on 3×32×32
 4    Conv(32→64, k3, p1)
 5    MaxPool(2, 2)
 6    ReLU                       L2 (default): 64×8×8 (64×7×7 on 1×28×28)
 7    Conv(64→128, k3, p1)       L3: 128×8×8
 8    Conv(128→256, k3, p1)
 9    Conv(256→256, k3, p1)
 10   MaxPool(k3, s2)
 11   ReLU                       L4: 256×3×3
 12   Linear(2304→1024)          (after a flatten that belongs to the server)
 13   Linear(1024→512)
 14   Linear(512→M)
====  =========================  ==========================================

Parameters on CIFAR-10 at L2: client 19,392, full 3,868,746 [C]. FLOPs per image: client 5,603,328 MACs,
full 69,833,728 MACs (fvcore) [C]; ``FlopCounterMode`` counts 2 FLOPs per MAC. FedASMU's AlexNet is not
specified (FedASMU spec A18); the zoo serves this CIFAR-style AlexNet for it too [A].
"""

from __future__ import annotations

import math

from torch import nn

from raysfl.models.config import ModelConfig
from raysfl.models.pooling import MaxPool2d
from raysfl.models.split import LayerStack


def alexnet(cfg: ModelConfig, in_channels: int, image_size: int, num_classes: int) -> LayerStack:
    """Build the GAS AlexNet as a :class:`LayerStack` with cuts ``L1``–``L4`` (GAS spec §10.9, Table 4).

    ``cfg.alexnet_width_divisor`` d > 1 divides every conv and hidden Linear width by d (32/d … 1024/d): the
    same 14 layers and cuts, about 1/d² of the FLOPs and parameters, for CPU-sized runs [A].
    """
    d = cfg.alexnet_width_divisor

    def w(width: int) -> int:
        return max(1, width // d)

    s = LayerStack((in_channels, image_size, image_size))
    s.add("conv1", nn.Conv2d(in_channels, w(32), kernel_size=3, padding=1))
    s.add("pool1", MaxPool2d(kernel_size=2, stride=2))
    s.add("relu1", nn.ReLU())
    s.cut("L1")
    s.add("conv2", nn.Conv2d(w(32), w(64), kernel_size=3, padding=1))
    s.add("pool2", MaxPool2d(kernel_size=2, stride=2))
    s.add("relu2", nn.ReLU())
    s.cut("L2")
    s.add("conv3", nn.Conv2d(w(64), w(128), kernel_size=3, padding=1))
    s.cut("L3")
    s.add("conv4", nn.Conv2d(w(128), w(256), kernel_size=3, padding=1))
    s.add("conv5", nn.Conv2d(w(256), w(256), kernel_size=3, padding=1))
    s.add("pool5", MaxPool2d(kernel_size=3, stride=2))
    s.add("relu5", nn.ReLU())
    s.cut("L4")
    s.add("flatten", nn.Flatten())
    s.add("fc1", nn.Linear(math.prod(s.shape), w(1024)))
    s.add("fc2", nn.Linear(w(1024), w(512)))
    s.add("fc3", nn.Linear(w(512), num_classes))
    return s
