"""Layer stacks with named cut points, and the client/server :class:`SplitModel` cut from them.

A model builder appends named layers to a :class:`LayerStack` front to back and marks the places where the
model may be split (``stack.cut("L2")``). The stack runs a zero probe through every layer as it is added, so
builders never compute feature-map sizes by hand and the shape at every cut is known. :meth:`LayerStack.split`
then returns the client part (the layers before the cut) and the server part (the rest), both
``nn.Sequential`` sharing the original layer objects, so ``server(client(x))`` is exactly the full model.

Example:
    >>> from torch import nn
    >>> stack = LayerStack((1, 4, 4))
    >>> stack.add("conv", nn.Conv2d(1, 2, 3))
    (2, 2, 2)
    >>> stack.cut("after_conv")
    >>> stack.add("flatten", nn.Flatten())
    (8,)
    >>> client, server, shape = stack.split("after_conv")
    >>> len(client), len(server), shape
    (1, 1, (2, 2, 2))
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch
from torch import nn

from raysfl.models.precision import PRECISIONS, use_autocast

MEMORY_FORMATS: dict[str, torch.memory_format] = {
    "contiguous": torch.contiguous_format,
    "channels_last": torch.channels_last,
}
"""The layouts of ``engine.memory_format`` (its choices must be these keys) and the torch format of each."""


class LayerStack:
    """An ordered list of named layers with named cut points, built front to back.

    The probe is a zero tensor of batch 1 created on the current default device, so a stack built under
    ``with torch.device("meta")`` checks shapes without allocating memory. Each layer is probed in eval mode
    without gradients (BatchNorm statistics stay untouched, dropout draws no random numbers) and then put back
    in training mode.
    """

    def __init__(self, input_shape: tuple[int, ...]) -> None:
        self.input_shape = tuple(input_shape)
        self._layers: list[tuple[str, nn.Module]] = []
        self._cuts: dict[str, int] = {}
        self._cut_shapes: dict[str, tuple[int, ...]] = {}
        self._probe = torch.zeros(1, *self.input_shape)

    @property
    def shape(self) -> tuple[int, ...]:
        """Per-sample output shape of the layers added so far (no batch dimension)."""
        return tuple(self._probe.shape[1:])

    @property
    def cuts(self) -> dict[str, int]:
        """Cut name → number of layers on the client side, in the order the cuts were marked."""
        return dict(self._cuts)

    def __len__(self) -> int:
        return len(self._layers)

    def add(self, name: str, module: nn.Module) -> tuple[int, ...]:
        """Append ``module`` under ``name`` and return the new per-sample output shape.

        Raises:
            ValueError: if ``name`` is already used.
        """
        if any(name == n for n, _ in self._layers):
            raise ValueError(f"layer name {name!r} is used twice")
        module.eval()
        with torch.no_grad():
            self._probe = module(self._probe)
        module.train()
        self._layers.append((name, module))
        return self.shape

    def cut(self, name: str) -> None:
        """Mark a cut point after the last added layer.

        Raises:
            ValueError: if ``name`` is already a cut or no layer has been added yet.
        """
        if name in self._cuts:
            raise ValueError(f"cut {name!r} is marked twice")
        if not self._layers:
            raise ValueError(f"cut {name!r} would leave the client part empty")
        self._cuts[name] = len(self._layers)
        self._cut_shapes[name] = self.shape

    def split(self, name: str) -> tuple[nn.Sequential, nn.Sequential, tuple[int, ...]]:
        """Return ``(client, server, activation_shape)`` for the cut ``name``.

        Raises:
            KeyError: if ``name`` is not a marked cut (the message lists the cuts).
            RuntimeError: if the cut leaves the server part empty (invariant: a cut has layers on both sides).
        """
        if name not in self._cuts:
            raise KeyError(f"{name!r} is not a cut; cuts are {', '.join(map(repr, self._cuts))}")
        k = self._cuts[name]
        if k >= len(self._layers):
            raise RuntimeError(f"cut {name!r} leaves the server part empty")
        client = nn.Sequential(OrderedDict(self._layers[:k]))
        server = nn.Sequential(OrderedDict(self._layers[k:]))
        return client, server, self._cut_shapes[name]


@dataclass(frozen=True)
class SplitModel:
    """A model cut into the client part and the server part, with an optional auxiliary head.

    Attributes:
        client: the first layers, run on the device; ``client(x)`` is the activation (smashed data).
        server: the remaining layers; ``server(client(x))`` equals the full model's logits exactly.
        aux: auxiliary head mapping the activation to logits (CSE-FSL spec §4.2), or ``None``.
        name: zoo name of the model.
        split: name of the cut point.
        activation_shape: per-sample shape of ``client(x)``, no batch dimension.
        input_shape: per-sample input shape ``(C, H, W)``.
        aux_name: zoo name of the auxiliary head ('' when ``aux`` is ``None``).
        num_classes: width of the logits.

    Every part outputs logits: no softmax is applied (cross-entropy on logits equals the papers'
    NLL on log-softmax).
    """

    client: nn.Module
    server: nn.Module
    aux: nn.Module | None
    name: str
    split: str
    activation_shape: tuple[int, ...]
    input_shape: tuple[int, ...]
    aux_name: str = ""
    num_classes: int = 0

    def full(self) -> nn.Sequential:
        """The whole model, client then server, sharing their parameters (what FL algorithms train)."""
        return nn.Sequential(OrderedDict(client=self.client, server=self.server))

    def use_memory_format(self, memory_format: str) -> SplitModel:
        """Store every part's conv weights ``"channels_last"`` or ``"contiguous"`` (in place; returns self).

        Convolutions follow their weight's layout: channels-last weights make them return channels-last
        feature maps and run oneDNN's channels-last kernels. The values are unchanged; what is computed from
        them differs in the last bits (``engine.memory_format``).
        """
        if memory_format not in MEMORY_FORMATS:
            raise ValueError(f"memory_format must be one of {sorted(MEMORY_FORMATS)}, got {memory_format!r}")
        for part in (self.client, self.server, self.aux):
            if part is not None:
                part.to(memory_format=MEMORY_FORMATS[memory_format])  # type: ignore[call-overload]  # not in the stub
        return self

    def use_precision(self, precision: str) -> SplitModel:
        """Run every part's layers in ``"float32"`` or under bfloat16 autocast (``"bfloat16"``); in place.

        Mixed precision (:mod:`raysfl.models.precision`): float32 parameters, gradients and layer outputs,
        convolutions and matmuls in bfloat16 (``engine.precision``). Returns self.
        """
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
        for part in (self.client, self.server, self.aux):
            if part is not None:
                use_autocast(part, PRECISIONS[precision])
        return self
