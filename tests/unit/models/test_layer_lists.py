"""The layers themselves, in order, against the specs' tables: what parameter and FLOP counts cannot see.

Counts pin the convolutions and linear layers; a ReLU added or removed, a pool's geometry or a dropout
rate would change neither. The expected lists are written from GAS spec §10.9 (the reference code's
``utils/network.py`` AlexNet and ``VGG16_split`` classifier), CSE-FSL spec §4.2 (the authors' layer lists)
and GAS App. H (ViT dropout 0.1).
"""

from __future__ import annotations

import pytest
from torch import nn

from raysfl.models import ModelConfig, build_split_model
from raysfl.models.normalization import LocalResponseNorm


def layers(module: nn.Module) -> list[str]:
    """Each child as type and geometry: ``Conv(3→32,k3,s1,p1)``, ``Pool(k2,s2,p0)``, ``Drop(0.5)``, ..."""
    out = []
    for child in module.children():
        if isinstance(child, nn.Conv2d):
            c = child
            out.append(
                f"Conv({c.in_channels}→{c.out_channels},k{c.kernel_size[0]},s{c.stride[0]},p{c.padding[0]})"
            )
        elif isinstance(child, nn.Linear):
            out.append(f"Linear({child.in_features}→{child.out_features})")
        elif isinstance(child, nn.MaxPool2d):
            out.append(f"Pool(k{child.kernel_size},s{child.stride},p{child.padding})")
        elif isinstance(child, nn.Dropout):
            out.append(f"Drop({child.p})")
        elif isinstance(child, LocalResponseNorm):
            out.append(f"LRN({child.size},{child.alpha:.3g},{child.beta},{child.k})")
        else:
            out.append(type(child).__name__)
    return out


def test_gas_alexnet_at_l2():
    """GAS spec §10.9: layers 1–6 on the client, 7–14 on the server; no ReLU after conv3 and conv4, none
    between the Linear layers, no BatchNorm or dropout."""
    m = build_split_model(ModelConfig(name="alexnet", split="L2"), 3, 32, 10, seed=0)
    assert layers(m.client) == [
        "Conv(3→32,k3,s1,p1)", "Pool(k2,s2,p0)", "ReLU", "Conv(32→64,k3,s1,p1)", "Pool(k2,s2,p0)", "ReLU",
    ]  # fmt: skip
    assert layers(m.server) == [
        "Conv(64→128,k3,s1,p1)", "Conv(128→256,k3,s1,p1)", "Conv(256→256,k3,s1,p1)", "Pool(k3,s2,p0)", "ReLU",
        "Flatten", "Linear(2304→1024)", "Linear(1024→512)", "Linear(512→10)",
    ]  # fmt: skip


@pytest.mark.parametrize(("split", "client_layers"), [("L1", 3), ("L2", 6), ("L3", 7), ("L4", 11)])
def test_gas_alexnet_splits_after_layers_3_6_7_11(split, client_layers):
    m = build_split_model(ModelConfig(name="alexnet", split=split), 3, 32, 10, seed=0)
    assert (
        len(layers(m.client)) == client_layers and len(layers(m.server)) == 14 - client_layers + 1
    )  # +Flatten


def test_gas_vgg16_classifier():
    """GAS spec §10.9: classifier 512→4096→4096→C with ReLU + Dropout (nn.Dropout's 0.5)."""
    m = build_split_model(ModelConfig(name="vgg16_bn", split="L4"), 3, 32, 10, seed=0)
    assert layers(m.server) == [
        "Flatten", "Linear(512→4096)", "ReLU", "Drop(0.5)", "Linear(4096→4096)", "ReLU", "Drop(0.5)",
        "Linear(4096→10)",
    ]  # fmt: skip


def test_cse_fsl_cifar10_as_the_authors_code():
    """CSE-FSL spec §4.2 [C]: LRN(4, 0.001/9, 0.75, 1); pool k3 s2 p1; LRN before the pool in block 2."""
    m = build_split_model(ModelConfig(name="cse_fsl_cifar10"), 3, 24, 10, seed=0)
    lrn = "LRN(4,0.000111,0.75,1.0)"
    assert layers(m.client) == [
        "Conv(3→64,k5,s1,p2)", "ReLU", "Pool(k3,s2,p1)", lrn,
        "Conv(64→64,k5,s1,p2)", "ReLU", lrn, "Pool(k3,s2,p1)",
    ]  # fmt: skip
    assert layers(m.server) == [
        "Flatten",
        "Linear(2304→384)",
        "ReLU",
        "Linear(384→192)",
        "ReLU",
        "Linear(192→10)",
    ]


def test_cse_fsl_femnist_as_reddi_et_al():
    """CSE-FSL spec §4.2: the client ends in MaxPool(2) + Dropout(0.25); the server has Dropout(0.5)."""
    m = build_split_model(ModelConfig(name="cse_fsl_femnist"), 1, 28, 62, seed=0)
    assert layers(m.client) == [
        "Conv(1→32,k3,s1,p0)", "ReLU", "Conv(32→64,k3,s1,p0)", "ReLU", "Pool(k2,s2,p0)", "Drop(0.25)",
    ]  # fmt: skip
    assert layers(m.server) == ["Flatten", "Linear(9216→128)", "ReLU", "Drop(0.5)", "Linear(128→62)"]


def test_vit_small_dropout_is_one_tenth_everywhere():
    """GAS App. H: dropout 0.1 for the Transformer layers and the embedding (25 dropouts in 6 blocks)."""
    m = build_split_model(ModelConfig(name="vit_small"), 3, 32, 10, seed=0)
    rates = [d.p for d in m.full().modules() if isinstance(d, nn.Dropout)]
    assert len(rates) == 1 + 6 * 4 and set(rates) == {0.1}
