"""raysfl's MaxPool2d: nn.MaxPool2d's values, indices and gradients, bit for bit, from another kernel."""

import itertools
import re

import pytest
import torch
from torch import nn

from raysfl.models.pooling import MaxPool2d, channels_last_pays
from tests.unit.models.zoo_scan import benchmark_stdout, zoo_layers

GEOMETRIES = [
    {"kernel_size": 2, "stride": 2},
    {"kernel_size": 3, "stride": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": 3, "stride": 1, "padding": 1},
    {"kernel_size": 2, "stride": 2, "ceil_mode": True},
    {"kernel_size": 3, "stride": 2, "dilation": 2},
    {"kernel_size": (2, 3), "stride": (1, 2)},
    {"kernel_size": 2},  # stride defaults to the kernel
]


def inputs(kind: str, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """Random maps; "ties": few distinct values, so windows hold several maxima; "nan": ties and NaNs."""
    if kind == "random":
        return torch.randn(shape, generator=gen)
    x = torch.randint(-2, 3, shape, generator=gen).float()
    if kind == "nan":
        x[torch.rand(shape, generator=gen) < 0.03] = float("nan")
    return x


@pytest.mark.parametrize(
    ("geometry", "kind"), list(itertools.product(GEOMETRIES, ["random", "ties", "nan"])), ids=str
)
@pytest.mark.parametrize("shape", [(4, 16, 33, 33), (4, 32, 28, 28), (8, 256, 7, 7)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)  # bfloat16: engine.precision
def test_values_and_gradients_are_those_of_nn_maxpool2d_bit_for_bit(geometry, kind, shape, dtype):
    gen = torch.Generator().manual_seed(7)
    x = inputs(kind, shape, gen).to(dtype)
    ref_in, new_in = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ref_out, new_out = nn.MaxPool2d(**geometry)(ref_in), MaxPool2d(**geometry)(new_in)
    assert new_out.grad_fn.name() == "_ChannelsLastMaxPoolBackward"  # the other kernel did run
    grad = torch.randn(ref_out.shape, generator=gen).to(dtype)
    ref_out.backward(grad)
    new_out.backward(grad)
    # NaN != NaN: compare the NaN positions, then the rest
    assert torch.equal(new_out.isnan(), ref_out.isnan())
    assert torch.equal(new_out.nan_to_num(99.0), ref_out.nan_to_num(99.0))
    assert torch.equal(new_in.grad, ref_in.grad)  # the same elements won, the same sums
    assert new_out.is_contiguous() and new_in.grad.is_contiguous()  # the layout autograd expects
    with torch.no_grad():  # evaluation: no indices kept
        plain = MaxPool2d(**geometry)(x)
    assert plain.grad_fn is None and plain.is_contiguous()
    assert torch.equal(plain.nan_to_num(99.0), ref_out.detach().nan_to_num(99.0))


def test_a_tie_goes_to_the_first_maximum_in_raster_order():
    window = torch.tensor([[1.0, 5.0], [5.0, 5.0]])  # three maxima; nn.MaxPool2d keeps the first
    x = window.repeat(32, 32).expand(1, 16, 64, 64).contiguous().requires_grad_(True)
    out = MaxPool2d(2)(x)
    assert out.grad_fn.name() == "_ChannelsLastMaxPoolBackward"
    out.sum().backward()
    assert torch.equal(x.grad, torch.tensor([[0.0, 1.0], [0.0, 0.0]]).repeat(32, 32).expand(1, 16, 64, 64))


def test_inputs_it_does_not_speed_up_take_nn_maxpool2d_path():
    assert channels_last_pays(torch.zeros(4, 16, 32, 32))
    assert not channels_last_pays(torch.zeros(4, 16, 32, 32).contiguous(memory_format=torch.channels_last))
    assert not channels_last_pays(torch.zeros(64, 6, 28, 28))  # fewer channels than a vector
    assert not channels_last_pays(torch.zeros(32, 16, 8, 8))  # too small to pay for the copies
    assert not channels_last_pays(torch.zeros(16, 64, 64))  # unbatched
    assert not channels_last_pays(torch.zeros(4, 16, 32, 32, dtype=torch.float16))
    assert not channels_last_pays(torch.zeros(4, 16, 32, 32).transpose(2, 3))  # a strided view
    x = torch.randn(4, 16, 32, 32).contiguous(memory_format=torch.channels_last).requires_grad_(True)
    out = MaxPool2d(2)(x)
    assert out.grad_fn.name() != "_ChannelsLastMaxPoolBackward"
    assert out.is_contiguous(memory_format=torch.channels_last)  # as nn.MaxPool2d gives it
    values, indices = MaxPool2d(2, return_indices=True)(torch.randn(4, 16, 32, 32))
    assert indices.dtype == torch.int64 and values.shape == indices.shape


def test_it_is_an_nn_maxpool2d_without_state():
    pool = MaxPool2d(3, stride=2, padding=1)
    assert isinstance(pool, nn.MaxPool2d) and repr(pool) == repr(nn.MaxPool2d(3, stride=2, padding=1))
    assert pool.state_dict() == {}


def test_every_zoo_model_pools_with_it():
    pools = zoo_layers(nn.MaxPool2d)
    for name, layers in pools.items():
        assert all(type(m) is MaxPool2d for m in layers), name
    assert {"alexnet", "lenet5", "vgg11", "resnet18", "cse_fsl_cifar10"} <= {
        n for n, ls in pools.items() if ls
    }


def test_the_benchmark_script_prints_both_routes_and_the_one_taken():
    """``benchmarks/maxpool_layout.py`` timed once: a row per case, routes as ``channels_last_pays``."""
    out = benchmark_stdout("maxpool_layout.py")
    rows = re.findall(
        r"^\| (.+?) \| .+? \| (\d+)×(\d+)×(\d+)×(\d+) \|.* \| (channels-last|NCHW) \|$", out, re.M
    )
    assert len(rows) == 11, out
    for _, n, c, h, w, route in rows:
        pays = channels_last_pays(torch.zeros(int(n), int(c), int(h), int(w)))
        assert route == ("channels-last" if pays else "NCHW")
    assert {route for *_, route in rows} == {"channels-last", "NCHW"}


def test_torch_func_transforms_give_nn_maxpool2d_numbers():
    """``torch.func.grad``, ``vmap`` and per-sample gradients (``vmap(grad)``) as with ``nn.MaxPool2d``."""
    gen = torch.Generator().manual_seed(9)
    xs = inputs("ties", (3, 4, 16, 32, 32), gen)  # ties: the same first maximum must win
    weight = torch.randn(4, 16, 16, 16, generator=gen)

    def loss(layer: nn.Module):
        return lambda t: (layer(t) * weight).sum()

    new, ref = MaxPool2d(2), nn.MaxPool2d(2)
    assert torch.equal(torch.func.grad(loss(new))(xs[0]), torch.func.grad(loss(ref))(xs[0]))
    assert torch.equal(torch.func.vmap(new)(xs), torch.func.vmap(ref)(xs))
    per_sample = torch.func.vmap(torch.func.grad(loss(new)))(xs)
    assert torch.equal(per_sample, torch.func.vmap(torch.func.grad(loss(ref)))(xs))
