"""Per-sample FLOPs, parameter counts and byte sizes of a :class:`~raysfl.models.split.SplitModel`.

FLOPs are measured with :class:`torch.utils.flop_counter.FlopCounterMode`, which counts 2 FLOPs per
multiply-accumulate of matrix products and convolutions (forward and backward kernels) and nothing for
element-wise ops, pooling or normalisation. fvcore, used by the GAS code, counts one per MAC, so GAS's
"5,603,328 FLOPs" for the AlexNet client (GAS spec §10.3) is 11,206,656 here. The system model turns these
counts into durations (docs/architecture.md, "Time model").

Byte sizes assume float32 on the wire: 4 bytes per activation value and per parameter. Buffers (BatchNorm
running statistics and its step counter) are not parameters; they are reported separately as
``*_buffer_bytes`` (4 bytes per floating value, 8 per int64 step counter, as a state dict holds them), for
methods that ship them with the model (FedASMU spec §2.6).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from raysfl.models.split import SplitModel

BYTES_PER_VALUE = 4
"""float32."""


@dataclass(frozen=True)
class ModelProfile:
    """Per-sample costs of one split model (FLOPs, parameter counts, bytes).

    Backward FLOPs cover what each side computes in split learning: the client's backward stops at its
    parameters (the input needs no gradient); the server's and the auxiliary head's include the gradient with
    respect to the incoming activation (the server sends it back; the auxiliary head passes it to the client).
    ``full_*`` = client + server, which is exactly what the composed model computes.

    A server pass that computes only one of the two gradients is charged that one:
    ``server_input_grad_flops`` is the backward to the activation alone (GAS's and MiniBatch-SFL's G_k
    pass, ``autograd.grad(loss, A)``), ``server_weight_grad_flops`` the backward to the server's parameters
    alone (a step on detached activations: GAS's and MiniBatch-SFL's server update, a local-loss FSL
    server step). Their sum exceeds ``server_backward_flops`` by what both compute: the gradient carried
    down through every layer but the first.
    """

    name: str
    split: str
    aux_name: str
    input_shape: tuple[int, ...]
    activation_shape: tuple[int, ...]
    client_forward_flops: int
    client_backward_flops: int
    server_forward_flops: int
    server_backward_flops: int
    server_input_grad_flops: int
    server_weight_grad_flops: int
    aux_forward_flops: int
    aux_backward_flops: int
    full_forward_flops: int
    full_backward_flops: int
    client_params: int
    server_params: int
    aux_params: int
    full_params: int
    client_buffers: int
    server_buffers: int
    aux_buffers: int
    activation_numel: int
    activation_bytes: int
    client_model_bytes: int
    server_model_bytes: int
    aux_model_bytes: int
    client_buffer_bytes: int
    server_buffer_bytes: int
    aux_buffer_bytes: int


def count_params(module: nn.Module | None) -> int:
    """Number of parameter values of ``module`` (0 for ``None``)."""
    return 0 if module is None else sum(p.numel() for p in module.parameters())


def count_buffers(module: nn.Module | None) -> int:
    """Number of buffer values of ``module`` (BatchNorm running mean/var and step counter; 0 for ``None``)."""
    return 0 if module is None else sum(b.numel() for b in module.buffers())


def buffer_bytes(module: nn.Module | None) -> int:
    """Bytes of ``module``'s buffers on the wire: floating values as float32, integers at their own size.

    BatchNorm's step counter (``num_batches_tracked``) is an int64: 8 bytes, as a state dict sends it.
    """
    if module is None:
        return 0
    return sum(
        b.numel() * (BYTES_PER_VALUE if b.is_floating_point() else b.element_size()) for b in module.buffers()
    )


def _forward_backward(module: nn.Module, x: torch.Tensor) -> tuple[int, int]:
    """FLOPs of ``module(x)`` and of its backward (to the parameters, and to ``x`` if it requires grad)."""
    with FlopCounterMode(display=False) as counter:
        out = module(x)
    forward = int(counter.get_total_flops())
    grad = torch.ones_like(out)
    with FlopCounterMode(display=False) as counter:
        torch.autograd.backward(out, grad)
    return forward, int(counter.get_total_flops())


def _one_gradient(module: nn.Module, x: torch.Tensor, to_input: bool) -> int:
    """FLOPs of the backward of ``module(x)`` to ``x`` alone (``to_input``) or to the parameters alone."""
    inp = x.detach().requires_grad_(to_input)
    out = module(inp)
    grad = torch.ones_like(out)
    with FlopCounterMode(display=False) as counter:
        if to_input:
            torch.autograd.grad(out, inp, grad)
        else:
            torch.autograd.backward(out, grad)
    return int(counter.get_total_flops())


def profile_split_model(model: SplitModel, batch_size: int = 2) -> ModelProfile:
    """Measure ``model`` on a random batch of ``batch_size`` and return per-sample counts.

    The parts are put in eval mode while counting (dropout and BatchNorm do not change FLOPs) and every
    submodule's mode is restored afterwards; gradients accumulated by the measurement are cleared. The global
    random state is untouched (a local generator draws the inputs). Counted ops scale linearly with the
    batch, so dividing by ``batch_size`` is exact.

    A model built under ``with torch.device("meta")`` is profiled from shapes alone, with the same counts and
    without allocating or computing anything (useful for large models when only the costs are needed).
    """
    parts = [m for m in (model.client, model.server, model.aux) if m is not None]
    modes = [(m, m.training) for part in parts for m in part.modules()]
    grads_before = {id(p): p.grad for part in parts for p in part.parameters()}
    gen = torch.Generator().manual_seed(0)
    device = next(iter(model.client.parameters()), torch.empty(0)).device
    try:
        for part in parts:
            part.eval()
        x = torch.randn(batch_size, *model.input_shape, generator=gen, device="cpu").to(device)
        act = torch.randn(batch_size, *model.activation_shape, generator=gen, device="cpu").to(device)
        act.requires_grad_()
        client_fwd, client_bwd = _forward_backward(model.client, x)
        server_fwd, server_bwd = _forward_backward(model.server, act)
        server_input_grad = _one_gradient(model.server, act, to_input=True)
        server_weight_grad = _one_gradient(model.server, act, to_input=False)
        aux_fwd, aux_bwd = _forward_backward(model.aux, act) if model.aux is not None else (0, 0)
    finally:
        for m, training in modes:
            m.training = training
        for part in parts:
            for p in part.parameters():
                p.grad = grads_before[id(p)]
    n = batch_size
    numel = math.prod(model.activation_shape)
    c, s, a = count_params(model.client), count_params(model.server), count_params(model.aux)
    cb, sb, ab = count_buffers(model.client), count_buffers(model.server), count_buffers(model.aux)
    return ModelProfile(
        name=model.name,
        split=model.split,
        aux_name=model.aux_name,
        input_shape=tuple(model.input_shape),
        activation_shape=tuple(model.activation_shape),
        client_forward_flops=client_fwd // n,
        client_backward_flops=client_bwd // n,
        server_forward_flops=server_fwd // n,
        server_backward_flops=server_bwd // n,
        server_input_grad_flops=server_input_grad // n,
        server_weight_grad_flops=server_weight_grad // n,
        aux_forward_flops=aux_fwd // n,
        aux_backward_flops=aux_bwd // n,
        full_forward_flops=(client_fwd + server_fwd) // n,
        full_backward_flops=(client_bwd + server_bwd) // n,
        client_params=c,
        server_params=s,
        aux_params=a,
        full_params=c + s,
        client_buffers=cb,
        server_buffers=sb,
        aux_buffers=ab,
        activation_numel=numel,
        activation_bytes=numel * BYTES_PER_VALUE,
        client_model_bytes=c * BYTES_PER_VALUE,
        server_model_bytes=s * BYTES_PER_VALUE,
        aux_model_bytes=a * BYTES_PER_VALUE,
        client_buffer_bytes=buffer_bytes(model.client),
        server_buffer_bytes=buffer_bytes(model.server),
        aux_buffer_bytes=buffer_bytes(model.aux),
    )


def _shape(shape: tuple[int, ...]) -> str:
    return "×".join(str(d) for d in shape)


def describe_model(model: SplitModel, profile: ModelProfile | None = None) -> str:
    """A short table of ``model``'s parts: parameters, bytes and per-sample FLOPs (``raysfl describe model``).

    ``profile`` is measured with :func:`profile_split_model` when not given.
    """
    p = profile if profile is not None else profile_split_model(model)
    head = (
        f"{p.name}  split {p.split}"
        + (f"  aux {p.aux_name}" if p.aux_name else "")
        + f"\ninput {_shape(p.input_shape)} -> activation {_shape(p.activation_shape)}"
        + f" ({p.activation_numel:,} values, {p.activation_bytes:,} B per sample as float32)"
    )
    rows: list[tuple[str, str | int, str | int, str | int, str | int, str | int]] = [
        ("part", "params", "param bytes", "buffer bytes", "fwd FLOPs/sample", "bwd FLOPs/sample")
    ]
    rows.append(
        (
            "client",
            p.client_params,
            p.client_model_bytes,
            p.client_buffer_bytes,
            p.client_forward_flops,
            p.client_backward_flops,
        )
    )
    rows.append(
        (
            "server",
            p.server_params,
            p.server_model_bytes,
            p.server_buffer_bytes,
            p.server_forward_flops,
            p.server_backward_flops,
        )
    )
    if p.aux_name:
        rows.append(
            (
                "aux",
                p.aux_params,
                p.aux_model_bytes,
                p.aux_buffer_bytes,
                p.aux_forward_flops,
                p.aux_backward_flops,
            )
        )
    rows.append(
        (
            "full",
            p.full_params,
            p.client_model_bytes + p.server_model_bytes,
            p.client_buffer_bytes + p.server_buffer_bytes,
            p.full_forward_flops,
            p.full_backward_flops,
        )
    )
    cells = [[r[0]] + [f"{v:,}" if isinstance(v, int) else v for v in r[1:]] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in cells
    ]
    return "\n".join([head, *lines])
