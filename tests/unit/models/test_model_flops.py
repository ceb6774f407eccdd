"""profile_split_model: what is counted, invariants of backward FLOPs, mode restoration, describe_model."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from raysfl.models import MODELS, ModelConfig, build_split_model, describe_model, profile_split_model
from raysfl.models.flops import count_buffers


def _meta_build(cfg, c, size, classes):
    """Counts do not depend on values: build on the meta device (no memory, no compute)."""
    with torch.device("meta"):
        return build_split_model(cfg, c, size, classes, seed=0)


def _measure(fn):
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def test_full_counts_equal_the_composed_model():
    model = _meta_build(ModelConfig(name="resnet20"), 3, 32, 10)
    p = profile_split_model(model)
    full = model.full().eval()
    x = torch.randn(2, 3, 32, 32, device="meta")
    assert _measure(lambda: full(x)) == 2 * p.full_forward_flops
    out = full(x)
    assert _measure(lambda: out.sum().backward()) == 2 * p.full_backward_flops


@pytest.mark.parametrize("name", [n for n in MODELS if n != "vit_small"])
def test_backward_is_about_twice_forward(name):
    entry = MODELS[name]
    c, size, _ = entry.inputs[0]
    p = profile_split_model(_meta_build(ModelConfig(name=name, aux="mlp"), c, size, 10))
    # The server and the aux head also return the activation gradient: exactly 2× for conv/linear/matmul.
    assert p.server_backward_flops == 2 * p.server_forward_flops
    assert p.aux_backward_flops == 2 * p.aux_forward_flops
    # The client skips only its first layer's input gradient.
    assert p.client_forward_flops <= p.client_backward_flops < 2 * p.client_forward_flops
    assert 1.4 <= p.full_backward_flops / p.full_forward_flops <= 2.0


def test_vit_counts_attention_products():
    p = profile_split_model(_meta_build(ModelConfig(name="vit_small"), 3, 32, 10))
    tokens, dim = 65, 512
    block = 2 * tokens * (dim * 3 * dim + dim * dim + 2 * dim * 512) + 2 * 2 * tokens * tokens * dim
    embed = 2 * 64 * dim * 3 * 4 * 4
    assert p.client_forward_flops == embed + block
    assert p.server_forward_flops == 5 * block + 2 * dim * 10
    assert p.server_backward_flops == 2 * p.server_forward_flops


def test_profile_restores_modes_and_gradients():
    model = build_split_model(ModelConfig(name="cse_fsl_femnist", aux="mlp"), 1, 28, 62, seed=0)
    model.client.train()
    model.server.eval()
    model.aux.drop_me = torch.nn.Dropout()  # a submodule in a mode of its own
    model.aux.drop_me.eval()
    profile_split_model(model)
    assert model.client.training and model.client.drop1.training
    assert not model.server.training and not model.server.drop2.training
    assert model.aux.training and not model.aux.drop_me.training
    assert all(p.grad is None for part in (model.client, model.server, model.aux) for p in part.parameters())


def test_bytes_and_buffers():
    model = _meta_build(ModelConfig(name="vgg16_bn", split="L1"), 3, 32, 10)
    p = profile_split_model(model)
    assert p.activation_bytes == 4 * 128 * 8 * 8
    assert p.client_model_bytes == 4 * p.client_params
    # BN running mean + var per channel and one step counter per BN layer, counted apart from parameters.
    assert p.client_buffers == count_buffers(model.client) == 2 * (64 + 64 + 128 + 128) + 4
    # float32 statistics at 4 bytes, the four int64 step counters at 8: what a state dict of the part holds
    assert p.client_buffer_bytes == 4 * 2 * (64 + 64 + 128 + 128) + 8 * 4
    assert p.client_buffer_bytes == sum(b.numel() * b.element_size() for b in model.client.buffers())
    assert p.aux_params == p.aux_model_bytes == 0 and p.aux_forward_flops == 0


def test_describe_model_table():
    model = build_split_model(ModelConfig(name="alexnet"), 3, 32, 10, seed=0)
    text = describe_model(model)
    assert text.splitlines()[0] == "alexnet  split L2"
    assert "input 3×32×32 -> activation 64×8×8 (4,096 values, 16,384 B per sample" in text
    client_row = next(line for line in text.splitlines() if line.startswith("client"))
    assert client_row.split() == ["client", "19,392", "77,568", "0", "11,206,656", "20,643,840"]
    assert next(line for line in text.splitlines() if line.startswith("full")).split()[1] == "3,868,746"


def test_one_gradient_passes_by_hand():
    """CSE-FSL's CIFAR-10 server is Linear(2304→384), Linear(384→192), Linear(192→10) (24×24 crops).
    Forward: 2·(2304·384 + 384·192 + 192·10) = 1,920,768 per sample. The backward to the activation alone
    runs every layer's input gradient, as many FLOPs; the backward to the weights alone runs every weight
    gradient plus the input gradients of the two upper layers, which the lower layers need: 1,920,768 +
    2·(384·192 + 192·10) = 2,072,064. Both at once: twice the forward."""
    p = profile_split_model(_meta_build(ModelConfig(name="cse_fsl_cifar10"), 3, 24, 10))
    assert p.server_forward_flops == 2 * (2304 * 384 + 384 * 192 + 192 * 10) == 1_920_768
    assert p.server_input_grad_flops == 1_920_768
    assert p.server_weight_grad_flops == 1_920_768 + 2 * (384 * 192 + 192 * 10) == 2_072_064
    assert p.server_backward_flops == 2 * 1_920_768


@pytest.mark.parametrize("name", [n for n in MODELS if n != "vit_small"])
def test_one_gradient_passes_bracket_the_full_backward(name):
    """Without products of two activations (ViT's attention has them), the input gradient costs what the
    forward does, and the weights' alone costs less than both together but more than the forward."""
    entry = MODELS[name]
    c, size, _ = entry.inputs[0]
    p = profile_split_model(_meta_build(ModelConfig(name=name), c, size, 10))
    assert p.server_input_grad_flops == p.server_forward_flops
    assert p.server_forward_flops <= p.server_weight_grad_flops < p.server_backward_flops
