"""Auxiliary heads: small networks that map the client activation to logits for a local loss.

CSE-FSL spec §4.2 (Tables III and IV of the paper): the "MLP" head is one Linear layer on the flattened
activation; a "CNN+MLP" head with C channels is a 1×1 convolution to C channels, an activation (not
specified by the paper: ReLU, or none with ``model.aux_activation = "none"``; CSE-FSL spec §2.7-12 [A]; it
does not change the parameter count), a flatten and one Linear layer.
Their parameter counts are (for an activation of shape (C_a, H, W) and M classes):

* ``mlp``: C_a·H·W·M + M (CIFAR-10 64×6×6 → 23,050; F-EMNIST 64×12×12 → 571,454);
* ``cnn_mlp_<C>``: (C_a·C + C) + (C·H·W·M + M) (CIFAR-10 C=54 → 22,960; F-EMNIST C=64 → 575,614).

Example:
    >>> head = AUX_HEADS["cnn_mlp_54"]((64, 6, 6), 10)
    >>> sum(p.numel() for p in head.parameters())
    22960
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

from torch import nn

from raysfl.models.config import AUX_ACTIVATIONS

AuxBuilder = Callable[..., nn.Module]
"""``(activation_shape, num_classes, activation="relu") -> head``; the head maps a batch of activations to
logits. ``activation`` (``"relu"`` or ``"none"``) is the one between a head's layers; a head without hidden
layers ignores it."""


def mlp_head(activation_shape: tuple[int, ...], num_classes: int, activation: str = "relu") -> nn.Module:
    """Flatten the activation and apply one Linear layer ("MLP", CSE-FSL spec §4.2).

    There is no hidden layer, so ``activation`` is unused.
    """
    del activation
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(activation_shape), num_classes))


def cnn_mlp_head(
    activation_shape: tuple[int, ...], num_classes: int, channels: int, activation: str = "relu"
) -> nn.Module:
    """A 1×1 conv to ``channels`` maps, ReLU or nothing, flatten, one Linear ("CNN+MLP", CSE-FSL spec §4.2).

    The activation is not given by the paper (CSE-FSL spec §2.7-12 [A]).

    Raises:
        ValueError: if the activation is not a (C, H, W) feature map, or ``activation`` is not one of
            :data:`~raysfl.models.config.AUX_ACTIVATIONS`.
    """
    if len(activation_shape) != 3:
        raise ValueError(f"a CNN+MLP head needs a (C, H, W) activation, got shape {activation_shape}")
    if activation not in AUX_ACTIVATIONS:
        raise ValueError(f"aux_activation: {activation!r} is not one of {', '.join(AUX_ACTIVATIONS)}")
    c, h, w = activation_shape
    layers: list[nn.Module] = [nn.Conv2d(c, channels, kernel_size=1)]
    if activation == "relu":
        layers.append(nn.ReLU())
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(channels * h * w, num_classes))


AUX_HEADS: dict[str, AuxBuilder] = {
    "mlp": mlp_head,
    # CSE-FSL Table III (CIFAR-10) widths.
    "cnn_mlp_54": partial(cnn_mlp_head, channels=54),
    "cnn_mlp_27": partial(cnn_mlp_head, channels=27),
    "cnn_mlp_14": partial(cnn_mlp_head, channels=14),
    "cnn_mlp_7": partial(cnn_mlp_head, channels=7),
    # CSE-FSL Table IV (F-EMNIST) widths.
    "cnn_mlp_64": partial(cnn_mlp_head, channels=64),
    "cnn_mlp_32": partial(cnn_mlp_head, channels=32),
    "cnn_mlp_8": partial(cnn_mlp_head, channels=8),
    "cnn_mlp_2": partial(cnn_mlp_head, channels=2),
}
"""Auxiliary head name → builder. Which heads a model offers is listed by its zoo entry."""
