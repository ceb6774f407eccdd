"""Mixed precision for a model: its convolutions and matmuls in bfloat16, float32 between its layers.

``engine.precision = "bfloat16"`` runs every layer with parameters of its own (convolutions, linear layers,
normalisations), and ViT's self-attention as a whole, under :class:`torch.autocast` with
``dtype=torch.bfloat16``: the ops on
autocast's lower-precision list (convolutions, linear layers, matmuls) take bfloat16 copies of their inputs
and weights and compute in bfloat16; the rest run in the dtype they are given. Each such layer's output is
cast back to float32. So the parameters, their gradients and the optimizer state stay float32 (mixed
precision, not a bfloat16 model), and everything between the layers and outside the model (pooling,
activations, the cut-layer activations a client sends, logits, losses, GAS's activation statistics,
aggregation) is float32 as before. Autograd records the casts, so a backward needs no autocast of its own.

The layers are switched with a forward pre-hook and a forward hook each (:func:`use_autocast`), not by
wrapping them: parameter and buffer names stay the same, so state dicts, checkpoints and
``torch.func.functional_call`` see the same model, and any container of the layers (a slice of an
``nn.Sequential``, a stack rebuilt from the children, a loop over the layers) computes as the model does.
Devices without autocast (``meta``, which validation builds on) run the layers as they are.

Effect: other numbers than float32 (bfloat16 keeps 8 significant bits of each operand and of each layer's
result; the kernels sum the products in float32); runs stay deterministic. On CPUs with native bfloat16
instructions (``avx512_bf16`` or AMX) oneDNN's bfloat16 kernels are faster than its float32 ones; on others
they are emulated and slower (:func:`native_bfloat16`; a run says so, :data:`EMULATED_BFLOAT16`). Narrow
layers gain nothing either: the two casts around each layer cost more than its bfloat16 kernel saves
(LeNet-5 ran slower; benchmarks/RESULTS.md).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

PRECISIONS: dict[str, torch.dtype | None] = {"float32": None, "bfloat16": torch.bfloat16}
"""``engine.precision`` → the autocast dtype (None: plain float32)."""

EMULATED_BFLOAT16 = (
    "engine.precision = 'bfloat16', but this CPU has no bfloat16 instructions (avx512_bf16, AMX): oneDNN "
    "emulates them, so the CPU's layers run slower than in float32 (a GPU server still computes in bfloat16)"
)
"""The note a run prints when it computes in bfloat16 on such a CPU."""

_HOOKED = "_raysfl_autocast"  # attribute naming the module's AutocastHooks (one per module)
AUTOCAST_REGION = "autocast_region"
"""A module class attribute: true makes :func:`use_autocast` hook the module though it has no parameters."""


class AutocastHooks:
    """The pair of hooks that runs one module's forward under :class:`torch.autocast`.

    ``enter`` (a forward pre-hook) opens an autocast region on the device of the first tensor argument;
    ``exit`` (a forward hook registered with ``always_call``, so it also runs when the forward raises)
    closes it and casts the outputs of the autocast dtype back to float32. Regions nest: a hooked module
    called inside another one's forward opens its own and closes it before the outer one. With
    ``dtype = None`` both hooks do nothing.
    """

    def __init__(self, dtype: torch.dtype | None) -> None:
        self.dtype = dtype
        self._open: list[torch.autocast | None] = []

    def enter(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        """Open the region (the forward pre-hook)."""
        device_type = _device_type(args)
        region = None
        if self.dtype is not None and device_type and torch.amp.is_autocast_available(device_type):
            region = torch.autocast(device_type, dtype=self.dtype)
            region.__enter__()
        self._open.append(region)

    def exit(self, module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
        """Close the region and return the output with float32 in place of the autocast dtype."""
        region = self._open.pop()
        if region is None:
            return output
        region.__exit__(None, None, None)
        return _to_float32(output, self.dtype)

    def __getstate__(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "_open": []}  # an open region is never copied or pickled


def use_autocast(module: nn.Module, dtype: torch.dtype | None) -> nn.Module:
    """Run the layers of ``module`` under autocast to ``dtype`` (None: plain); in place, returns ``module``.

    Every submodule with parameters of its own (convolutions, linear layers, normalisations) gets the hooks,
    so any container of them (a slice of an ``nn.Sequential``, a stack rebuilt from the children, a loop over
    the layers) computes as the part does. So does a parameter-free module whose class sets
    :data:`AUTOCAST_REGION` true because its forward multiplies activations with each other (the
    attention products ``q·kᵀ`` and ``weights·v`` of ``vit.SelfAttention``). Calling it again changes the
    dtype; names, parameters and buffers are untouched.
    """
    for layer in module.modules():
        own = next(layer.parameters(recurse=False), None) is not None
        if not (own or getattr(type(layer), AUTOCAST_REGION, False)):
            continue
        hooks: AutocastHooks | None = getattr(layer, _HOOKED, None)
        if hooks is None:
            if dtype is None:
                continue
            hooks = AutocastHooks(dtype)
            layer.register_forward_pre_hook(hooks.enter)
            layer.register_forward_hook(hooks.exit, always_call=True)
            setattr(layer, _HOOKED, hooks)
        hooks.dtype = dtype
    return module


def autocast_dtype(module: nn.Module) -> torch.dtype | None:
    """The dtype ``module`` runs under (:func:`use_autocast`), or None for plain float32."""
    hooks: AutocastHooks | None = getattr(module, _HOOKED, None)
    return None if hooks is None else hooks.dtype


def native_bfloat16() -> bool:
    """Whether this CPU computes bfloat16 natively in oneDNN (``avx512_bf16`` or AMX); else it emulates it."""
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return bool(check()) if check is not None else False


def _device_type(args: tuple[Any, ...]) -> str | None:
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.device.type
    return None


def _to_float32(output: Any, dtype: torch.dtype | None) -> Any:
    if isinstance(output, torch.Tensor):
        return output.float() if output.dtype == dtype else output
    if type(output) in (tuple, list):
        return type(output)(_to_float32(o, dtype) for o in output)
    return output
