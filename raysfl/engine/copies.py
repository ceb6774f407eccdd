"""What another process receives of a call's argument or result: a copy that shares nothing with the sender's.

Ray serialises every argument and result of an actor call; the local backend copies them the same way
(:func:`as_sent`), so a logic that changes a received or returned value in place gives the same numbers in
one process as on Ray. Trees of plain containers, CPU tensors and NumPy arrays (model weights, activations,
gradients, metrics) are copied directly, as a pickle round trip would copy them; anything else takes the
round trip itself.
"""

from __future__ import annotations

import pickle
from collections import OrderedDict
from typing import Any

import numpy as np
import torch

_IMMUTABLE = frozenset({type(None), bool, int, float, complex, str, bytes})


class _NotPlainError(Exception):
    """The value holds something :class:`_Copier` does not copy: the pickle round trip copies it."""


def as_sent(value: Any) -> Any:
    """``value`` as another process receives it: a copy sharing nothing with it (see the module docstring).

    A value the standard pickle cannot serialise (a lambda, which Ray's cloudpickle can) is passed as it is.
    """
    try:
        return _Copier().copy(value)
    except _NotPlainError:
        pass
    try:
        return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except (pickle.PicklingError, TypeError, AttributeError):
        return value


class _Copier:
    """Copies a tree as a pickle round trip does, without the bytes in between.

    As pickle's memo does, an object reached twice is copied once. As pickle does, each tensor gets a copy of
    its whole storage and keeps its offset, sizes and strides: two views of one storage no longer share
    one after the trip. The originals are kept alive while copying, so the ids that key the memo stay theirs.
    """

    def __init__(self) -> None:
        self.memo: dict[int, Any] = {}
        self.originals: list[Any] = []

    def copy(self, value: Any) -> Any:
        """``value``'s copy (:class:`_NotPlainError` when it holds anything but the kinds listed above)."""
        if type(value) in _IMMUTABLE:
            return value
        key = id(value)
        if key in self.memo:
            return self.memo[key]
        self.originals.append(value)
        kind = type(value)
        if kind is dict or kind is OrderedDict:
            out: dict[Any, Any] = kind()
            self.memo[key] = out
            for k, v in value.items():
                out[self.copy(k)] = self.copy(v)
            if kind is OrderedDict and vars(value):  # a state dict's _metadata
                out.__dict__.update(self.copy(dict(vars(value))))
            return out
        if kind is list:
            out_list: list[Any] = []
            self.memo[key] = out_list
            out_list.extend(self.copy(v) for v in value)
            return out_list
        if kind is tuple:
            out_tuple = tuple(self.copy(v) for v in value)
            self.memo[key] = out_tuple
            return out_tuple
        if kind is torch.Tensor:
            out_tensor = self._tensor(value)
            self.memo[key] = out_tensor
            return out_tensor
        if kind is np.ndarray and not value.dtype.hasobject:
            out_array = np.array(value, copy=True, order="A")
            out_array.flags.writeable = value.flags.writeable  # pickle keeps a read-only array read-only
            self.memo[key] = out_array
            return out_array
        if isinstance(value, np.generic) and not isinstance(value, (np.object_, np.void)):
            return value  # a NumPy scalar: immutable (a structured one, np.void, views its array)
        raise _NotPlainError

    def _tensor(self, t: torch.Tensor) -> torch.Tensor:
        """A dense CPU tensor's copy as pickle rebuilds it (anything else: :class:`_NotPlainError`)."""
        if (
            t.layout != torch.strided
            or t.device.type != "cpu"
            or t.is_quantized
            or t.is_conj()
            or t.is_neg()
            or any(n is not None for n in getattr(t, "names", None) or ())
            or t.__dict__
        ):
            raise _NotPlainError
        storage = t.untyped_storage().clone()
        out = torch.empty((0,), dtype=t.dtype).set_(storage, t.storage_offset(), t.size(), t.stride())
        out.requires_grad_(t.requires_grad)  # a leaf, as pickle rebuilds even a tensor with a history
        return out
