"""Whether a model's training forward treats every sample of a batch on its own.

A computation may split a batch and put the parts' results together only where each sample's output in
training mode depends on that sample and the parameters alone. Two kinds of layer break that:

* **batch normalisation** (``BatchNorm1d/2d/3d``, ``SyncBatchNorm``): in training mode a sample's output
  depends on its batch's mean and variance, and every batch moves the running statistics;
* **dropout** with p > 0 (``Dropout``, ``Dropout1d/2d/3d``, ``AlphaDropout``, ...): each forward draws its
  own masks, so a forward repeated or split draws other random numbers.

Layers that normalise within one sample (``LayerNorm``, ``GroupNorm``, ``InstanceNorm``,
``LocalResponseNorm``) keep samples apart.
"""

from __future__ import annotations

from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.dropout import _DropoutNd


def batch_coupled_layers(module: nn.Module) -> list[str]:
    """Names (as in ``named_modules``) of the layers of ``module`` that couple a batch's samples in training.

    Batch normalisation, and dropout with a nonzero rate (module docstring). Empty when every sample's
    training-mode output depends on that sample and the parameters alone.
    """
    return [
        name or type(layer).__name__
        for name, layer in module.named_modules()
        if isinstance(layer, _BatchNorm) or (isinstance(layer, _DropoutNd) and layer.p > 0)
    ]
