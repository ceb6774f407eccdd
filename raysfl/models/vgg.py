"""VGG networks: VGG16-BN of GAS, VGG-19 of lightweight FedSL and VGG-11 of FedASMU.

One component builder, :func:`add_vgg_features`, appends 3×3 convs (pad 1, optional BatchNorm, ReLU) and
2×2 max pools from a configuration list and marks cuts "after conv k". A cut that is followed by a pool
includes the pool on the client side unless ``pool_on_client`` is False. The presets add their classifiers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from torch import nn

from raysfl.models.config import ModelConfig
from raysfl.models.pooling import MaxPool2d
from raysfl.models.split import LayerStack

VGG11 = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")
"""Configuration "A" of Simonyan & Zisserman: 8 convs."""
VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")
"""Configuration "D": 13 convs."""
VGG19 = (
    64,
    64,
    "M",
    128,
    128,
    "M",
    256,
    256,
    256,
    256,
    "M",
    512,
    512,
    512,
    512,
    "M",
    512,
    512,
    512,
    512,
    "M",
)
"""Configuration "E": 16 convs (lightweight-FedSL spec §5.2)."""


def add_vgg_features(
    s: LayerStack,
    config: Sequence[int | str],
    batch_norm: bool,
    cuts: Mapping[int, str],
    pool_on_client: bool = True,
) -> None:
    """Append VGG feature layers to ``s`` and mark ``cuts`` (conv index, counted from 1 → cut name).

    Layers are named ``conv{k}``, ``bn{k}``, ``relu{k}`` and ``pool{j}``. A cut after conv k goes after its
    ReLU, or after the following pool when there is one and ``pool_on_client`` is True.
    """
    channels = s.shape[0]
    conv = pool = 0
    pending: str | None = None  # a cut waiting for the pool that follows its conv
    for item in config:
        if item == "M":
            pool += 1
            s.add(f"pool{pool}", MaxPool2d(kernel_size=2, stride=2))
            if pending is not None:
                s.cut(pending)
                pending = None
            continue
        if pending is not None:
            s.cut(pending)
            pending = None
        conv += 1
        width = int(item)
        s.add(f"conv{conv}", nn.Conv2d(channels, width, kernel_size=3, padding=1))
        if batch_norm:
            s.add(f"bn{conv}", nn.BatchNorm2d(width))
        s.add(f"relu{conv}", nn.ReLU())
        channels = width
        if conv in cuts:
            if pool_on_client:
                pending = cuts[conv]
            else:
                s.cut(cuts[conv])
    if pending is not None:
        s.cut(pending)


def vgg16_bn(cfg: ModelConfig, in_channels: int, image_size: int, num_classes: int) -> LayerStack:
    """VGG16 with BatchNorm of the GAS code, cuts ``L1``–``L4`` after conv 4/7/10/13 + pool (GAS spec §10.9).

    Classifier: AvgPool(1) (identity on the 1×1 map, kept on the client at L4), flatten, Linear(512→4096),
    ReLU, Dropout, Linear(4096→4096), ReLU, Dropout, Linear(4096→M) [C].
    """
    del cfg
    s = LayerStack((in_channels, image_size, image_size))
    add_vgg_features(s, VGG16, batch_norm=True, cuts={4: "L1", 7: "L2", 10: "L3"})
    s.add("avgpool", nn.AvgPool2d(kernel_size=1, stride=1))
    s.cut("L4")
    s.add("flatten", nn.Flatten())
    s.add("fc1", nn.Linear(math.prod(s.shape), 4096))
    s.add("relu_fc1", nn.ReLU())
    s.add("drop1", nn.Dropout())
    s.add("fc2", nn.Linear(4096, 4096))
    s.add("relu_fc2", nn.ReLU())
    s.add("drop2", nn.Dropout())
    s.add("fc3", nn.Linear(4096, num_classes))
    return s


def vgg19(cfg: ModelConfig, in_channels: int, image_size: int, num_classes: int) -> LayerStack:
    """VGG-19 of lightweight FedSL with cuts ``Lc4``, ``Lc8``, ``Lc12`` (lightweight-FedSL spec §5.2).

    L_c counts conv layers on the client; each of 4, 8, 12 closes a VGG block. BatchNorm and keeping the
    closing pool on the client are options [A]. Classifier [A]: Linear(512→512), ReLU, Linear(512→512), ReLU,
    Linear(512→M), so 16 conv + 3 FC = 19 weight layers. ``vgg19_width_divisor`` d > 1 divides every conv
    width and the hidden FC width by d (same depth and cuts, about 1/d² of the FLOPs) for quick CPU runs [A].
    """
    div = cfg.vgg19_width_divisor
    config = tuple(item if item == "M" else max(int(item) // div, 1) for item in VGG19)
    hidden = max(512 // div, 1)
    s = LayerStack((in_channels, image_size, image_size))
    add_vgg_features(
        s,
        config,
        batch_norm=cfg.vgg19_batch_norm,
        cuts={4: "Lc4", 8: "Lc8", 12: "Lc12"},
        pool_on_client=cfg.vgg19_pool_on_client,
    )
    s.add("flatten", nn.Flatten())
    s.add("fc1", nn.Linear(math.prod(s.shape), hidden))
    s.add("relu_fc1", nn.ReLU())
    s.add("fc2", nn.Linear(hidden, hidden))
    s.add("relu_fc2", nn.ReLU())
    s.add("fc3", nn.Linear(hidden, num_classes))
    return s


def vgg11(cfg: ModelConfig, in_channels: int, image_size: int, num_classes: int) -> LayerStack:
    """CIFAR-style VGG-11 for FedASMU, cuts ``block1``–``block4`` after the pool closing each block.

    FedASMU does not specify the variant (FedASMU spec A18) [A]: 8 convs with BatchNorm (option), AvgPool(1),
    flatten and one Linear(512→M): 9,231,114 parameters on CIFAR-10, which matches the spec's "about 37 MB
    per device" (FedASMU spec §6).
    """
    s = LayerStack((in_channels, image_size, image_size))
    add_vgg_features(
        s, VGG11, batch_norm=cfg.vgg11_batch_norm, cuts={1: "block1", 2: "block2", 4: "block3", 6: "block4"}
    )
    s.add("avgpool", nn.AvgPool2d(kernel_size=1, stride=1))
    s.add("flatten", nn.Flatten())
    s.add("fc", nn.Linear(math.prod(s.shape), num_classes))
    return s
