"""raysfl's LocalResponseNorm: nn.LocalResponseNorm's outputs and gradients, bit for bit, by other sums."""

import itertools
import re

import pytest
import torch
from torch import nn

from raysfl.models.config import ModelConfig
from raysfl.models.normalization import (
    LocalResponseNorm,
    _ChannelWindowMean,
    channel_window_mean,
    window_sum_applies,
)
from raysfl.models.zoo import build_split_model
from tests.unit.models.zoo_scan import benchmark_stdout, zoo_layers

# (size, alpha, beta, k): CSE-FSL's layer, torch's defaults, then odd and even windows wider than C
SETTINGS = [(4, 0.001 / 9.0, 0.75, 1.0), (5, 1e-4, 0.75, 1.0), (1, 1e-2, 0.5, 2.0), (2, 0.1, 1.5, 0.5)]
SETTINGS += [(3, 1e-3, 0.75, 1.0), (7, 1e-3, 0.75, 1.0)]
SHAPES = [(32, 64, 12, 12), (4, 5, 7, 9), (3, 3, 4, 4), (8, 16, 1, 1), (2, 6, 3, 4, 5)]


def inputs(kind: str, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Random maps at several scales; "special": zeros, ±inf and NaN sprinkled in."""
    x = torch.randn(shape, generator=gen, dtype=torch.float64) * 10 ** torch.randint(
        -3, 4, shape, generator=gen
    )
    if kind == "special":
        pick = torch.rand(shape, generator=gen)
        x[pick < 0.05] = 0.0
        x[(pick >= 0.05) & (pick < 0.07)] = float("inf")
        x[(pick >= 0.07) & (pick < 0.09)] = -float("inf")
        x[(pick >= 0.09) & (pick < 0.11)] = float("nan")
    return x.to(dtype)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, NaNs in the same places."""
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("kind", ["random", "special"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("setting", SETTINGS, ids=str)
def test_outputs_and_gradients_are_those_of_nn_local_response_norm_bit_for_bit(setting, shape, kind, dtype):
    gen = torch.Generator().manual_seed(11)
    x = inputs(kind, shape, dtype, gen)
    ref_in, new_in = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ref_out, new_out = nn.LocalResponseNorm(*setting)(ref_in), LocalResponseNorm(*setting)(new_in)
    assert "_ChannelWindowMeanBackward" in graph_names(new_out)  # the shifted-plane sum did run
    assert "AvgPool3DBackward0" in graph_names(ref_out)
    grad = torch.randn(ref_out.shape, generator=gen, dtype=dtype)
    ref_out.backward(grad)
    new_out.backward(grad)
    assert same_bits(new_out, ref_out)
    assert same_bits(new_in.grad, ref_in.grad)
    with torch.no_grad():  # evaluation
        plain = LocalResponseNorm(*setting)(x)
    assert plain.grad_fn is None and same_bits(plain, ref_out.detach())


def graph_names(t: torch.Tensor) -> set[str]:
    """Names of every node of ``t``'s autograd graph."""
    seen, todo = set(), [t.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node.name() in seen:
            continue
        seen.add(node.name())
        todo.extend(f for f, _ in node.next_functions)
    return seen


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
def test_window_mean_by_hand(size):
    squares = torch.tensor([1.0, 2.0, 4.0, 8.0, 16.0], dtype=torch.float64).view(1, 1, 5, 1, 1)
    lo, hi = size // 2, (size - 1) // 2  # the window of channel c: [c - lo, c + hi], clipped
    expected = [sum(2.0**j for j in range(max(0, c - lo), min(5, c + hi + 1))) / size for c in range(5)]
    assert channel_window_mean(squares, size).flatten().tolist() == expected


def test_backward_spreads_each_gradient_over_its_window():
    squares = torch.zeros(1, 1, 4, 1, 1, requires_grad=True)
    mean = _ChannelWindowMean.apply(squares, 3)
    mean.backward(torch.tensor([3.0, 6.0, 12.0, 24.0]).view(1, 1, 4, 1, 1))
    # input p feeds the outputs p-1, p, p+1 (window [c-1, c+1]); each passes its gradient / 3
    assert squares.grad.flatten().tolist() == [1.0 + 2.0, 1.0 + 2.0 + 4.0, 2.0 + 4.0 + 8.0, 4.0 + 8.0]


def test_inputs_it_does_not_handle_take_nn_local_response_norm_path():
    assert window_sum_applies(torch.zeros(2, 8, 4, 4))
    assert window_sum_applies(torch.zeros(2, 8, 4, 4, 3, dtype=torch.float64))
    assert not window_sum_applies(torch.zeros(8, 4, 4))  # 3-D: torch pools with avg_pool2d there
    assert not window_sum_applies(torch.zeros(2, 8, 4, 4, dtype=torch.bfloat16))  # sums in float there
    assert not window_sum_applies(torch.zeros(2, 8, 4, 4).transpose(2, 3))  # a strided view
    assert not window_sum_applies(torch.zeros(2, 8, 4, 4).contiguous(memory_format=torch.channels_last))
    assert not window_sum_applies(torch.zeros(0, 8, 4, 4))
    for x in (torch.randn(8, 4, 4), torch.randn(2, 8, 4, 4).transpose(2, 3)):
        x.requires_grad_(True)
        out = LocalResponseNorm(4)(x)
        assert "AvgPool3DBackward0" in graph_names(out) or "AvgPool2DBackward0" in graph_names(out)
        assert torch.equal(out, nn.LocalResponseNorm(4)(x))


def test_it_is_a_drop_in_nn_local_response_norm():
    layer = LocalResponseNorm(4, alpha=0.001 / 9.0, beta=0.75, k=1.0)
    assert isinstance(layer, nn.LocalResponseNorm)
    assert (layer.size, layer.alpha, layer.beta, layer.k) == (4, 0.001 / 9.0, 0.75, 1.0)
    assert not list(layer.parameters()) and not list(layer.buffers())
    assert repr(layer) == repr(nn.LocalResponseNorm(4, alpha=0.001 / 9.0, beta=0.75, k=1.0))


def test_every_zoo_model_normalises_through_it():
    layers = zoo_layers(nn.LocalResponseNorm)
    assert all(type(m) is LocalResponseNorm for ls in layers.values() for m in ls)
    assert {name: len(ls) for name, ls in layers.items() if ls} == {"cse_fsl_cifar10": 2}


def test_cse_fsl_cifar10_step_equals_the_torch_layers_bit_for_bit():
    """A training step of CSE-FSL's CIFAR-10 client: the same loss and gradients with nn's layer."""
    for seed, batch in itertools.product((0, 1), (1, 50)):
        cfg = ModelConfig(name="cse_fsl_cifar10", split="conv2")
        client = build_split_model(cfg, 3, 24, 10, seed=seed).client
        reference = build_split_model(cfg, 3, 24, 10, seed=seed).client
        for layer_name in ("lrn1", "lrn2"):
            layer = getattr(reference, layer_name)
            assert type(layer) is LocalResponseNorm
            setattr(reference, layer_name, nn.LocalResponseNorm(layer.size, layer.alpha, layer.beta, layer.k))
        x = torch.randn(batch, 3, 24, 24, generator=torch.Generator().manual_seed(seed))
        out, ref = client(x), reference(x)
        assert torch.equal(out, ref)
        out.square().sum().backward()
        ref.square().sum().backward()
        for (n, p), (_, q) in zip(client.named_parameters(), reference.named_parameters(), strict=True):
            assert torch.equal(p.grad, q.grad), n


def test_the_benchmark_script_prints_a_row_per_case():
    """``benchmarks/local_response_norm.py`` timed once: both layers, every case, a speed ratio each."""
    out = benchmark_stdout("local_response_norm.py")
    rows = re.findall(r"^\| (.+?) \| (\d+)×(\d+)×(\d+)×(\d+) \|((?: [\d.]+ \|){6})$", out, re.M)
    assert len(rows) == 4, out
    assert rows[0][:5] == ("CSE-FSL lrn1 / lrn2, training batch", "50", "64", "12", "12")


def test_torch_func_transforms_give_nn_local_response_norm_numbers():
    """``torch.func.grad``, ``vmap`` and per-sample gradients (``vmap(grad)``) as with torch's layer."""
    gen = torch.Generator().manual_seed(5)
    xs = inputs("special", (3, 4, 8, 5, 5), torch.float32, gen)
    weight = torch.randn(4, 8, 5, 5, generator=gen)

    def loss(layer: nn.Module):
        return lambda t: (layer(t) * weight).sum()

    new, ref = LocalResponseNorm(4), nn.LocalResponseNorm(4)
    assert same_bits(torch.func.grad(loss(new))(xs[0]), torch.func.grad(loss(ref))(xs[0]))
    assert same_bits(torch.func.vmap(new)(xs), torch.func.vmap(ref)(xs))
    per_sample = torch.func.vmap(torch.func.grad(loss(new)))(xs)
    assert same_bits(per_sample, torch.func.vmap(torch.func.grad(loss(ref)))(xs))
