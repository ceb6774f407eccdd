"""Parameter counts, FLOPs and activation shapes against the numbers in the specs.

FlopCounterMode counts 2 FLOPs per multiply-accumulate of convolutions and matrix products and nothing for
bias adds, ReLU, pooling or normalisation; fvcore (used by the GAS code, GAS spec §10.3) counts 1 per MAC
over the same ops, so every spec MAC count appears here doubled, exactly.

Most models are built on the meta device: shapes, parameter counts and FLOPs come out the same (checked by
``test_meta_profile_equals_real_profile``) without allocating or computing anything.
"""

import dataclasses
import math

import pytest
import torch

from raysfl.models import ModelConfig, build_split_model, profile_split_model
from raysfl.models.flops import count_params


def build(name, split="", c=3, size=32, classes=10, aux="", meta=True, **options):
    cfg = ModelConfig(name=name, split=split, aux=aux, **options)
    with torch.device("meta" if meta else "cpu"):
        return build_split_model(cfg, c, size, classes, seed=0)


def test_meta_profile_equals_real_profile():
    real = profile_split_model(build("alexnet", "L2", aux="mlp", meta=False))
    assert real == profile_split_model(build("alexnet", "L2", aux="mlp"))
    assert dataclasses.asdict(real)["client_params"] == 19_392


# --- GAS AlexNet (GAS spec §10.9, §10.3) ---------------------------------------------------------------


def test_gas_alexnet_cifar_l2_matches_the_reference_constants():
    p = profile_split_model(build("alexnet", "L2"))
    assert p.client_params == 19_392
    assert p.full_params == 3_868_746
    assert p.client_model_bytes * 8 == 620_544  # client-model upload bits
    assert p.full_params * 32 == 123_799_872  # FL full-model upload bits
    assert p.activation_numel == 64 * 8 * 8
    assert p.activation_bytes * 8 == 131_072  # S_act bits per sample
    assert p.client_forward_flops == 2 * 5_603_328 == 11_206_656
    # fvcore's 69,833,728 MACs counts the same ops (5 convs + 3 Linears, no bias), so no gap to explain.
    assert p.full_forward_flops == 2 * 69_833_728
    # Backward: every layer computes its weight gradient (= its forward FLOPs), and every layer but the first
    # also computes its input gradient; conv1 forward is 2 * 884,736 (S2FL's L1 workload, GAS spec §10.10).
    assert p.client_backward_flops == 2 * p.client_forward_flops - 2 * 884_736
    assert p.server_backward_flops == 2 * p.server_forward_flops


def test_gas_alexnet_l1_workload_is_s2fl_candidate():
    p = profile_split_model(build("alexnet", "L1"))
    assert p.client_forward_flops == 2 * 884_736
    assert p.activation_bytes * 8 == 262_144  # S2FL candidate activation bits (GAS spec §10.10)


@pytest.mark.parametrize(
    ("split", "shape"),
    [("L1", (32, 16, 16)), ("L2", (64, 8, 8)), ("L3", (128, 8, 8)), ("L4", (256, 3, 3))],
)
def test_gas_alexnet_cifar_activation_shapes(split, shape):
    model = build("alexnet", split)
    assert model.activation_shape == shape
    assert count_params(model.client) + count_params(model.server) == 3_868_746


def test_gas_alexnet_fmnist_variant():
    model = build("alexnet", "L2", c=1, size=28)
    assert model.activation_shape == (64, 7, 7)
    assert model.server.fc1.in_features == 256 * 3 * 3  # MaxPool(k3, s2) on 7×7 gives 3×3
    assert count_params(model.client) == 320 + 18_496


def test_alexnet_width_divisor_halves_every_width_and_keeps_the_cuts():
    model = build("alexnet", "L2", c=1, size=28, alexnet_width_divisor=2)
    assert model.activation_shape == (32, 7, 7)
    # Hand count: conv1 1→16 (9·16 + 16), conv2 16→32 (9·16·32 + 32).
    assert count_params(model.client) == 160 + 4_640
    # conv3 32→64, conv4 64→128, conv5 128→128, fc1 128·3·3→512, fc2 512→256, fc3 256→10.
    server = (9 * 32 * 64 + 64) + (9 * 64 * 128 + 128) + (9 * 128 * 128 + 128)
    server += (1152 * 512 + 512) + (512 * 256 + 256) + (256 * 10 + 10)
    assert count_params(model.server) == server
    for split, shape in [("L1", (16, 14, 14)), ("L3", (64, 7, 7)), ("L4", (128, 3, 3))]:
        assert build("alexnet", split, c=1, size=28, alexnet_width_divisor=2).activation_shape == shape


# --- GAS VGG16-BN (GAS spec §10.9, Table 4) -------------------------------------------------------------


def test_gas_vgg16_split_activation_shapes():
    shapes = {s: build("vgg16_bn", s).activation_shape for s in ("L1", "L2", "L3", "L4")}
    assert shapes == {"L1": (128, 8, 8), "L2": (256, 4, 4), "L3": (512, 2, 2), "L4": (512, 1, 1)}
    # 13 conv (14,714,688) + BN (8,448) + 512-4096-4096-10 classifier (18,923,530).
    assert count_params(build("vgg16_bn").full()) == 33_646_666


# --- Lightweight FedSL VGG-19 (lightweight-FedSL spec §5.2) --------------------------------------------

# Columns of the spec table: L_c → (cumulative client conv params without BN, cumulative client forward MACs,
# activations after the following pool, BN parameters 2·ΣC_out of the client convs).
VGG19_TABLE = {
    "Lc4": (260_160, 96_141_312, 8_192, 2 * (64 + 64 + 128 + 128)),
    "Lc8": (2_325_568, 228_261_888, 4_096, 2 * (64 + 64 + 128 + 128 + 4 * 256)),
    "Lc12": (10_585_152, 360_382_464, 2_048, 2 * (64 + 64 + 128 + 128 + 4 * 256 + 4 * 512)),
}


@pytest.mark.parametrize("split", list(VGG19_TABLE))
def test_vgg19_client_matches_spec_table(split):
    conv_params, macs, acts, bn_params = VGG19_TABLE[split]
    plain = profile_split_model(build("vgg19", split, vgg19_batch_norm=False))
    assert plain.client_params == conv_params  # the table counts conv weights + biases, no BN
    assert plain.client_forward_flops == 2 * macs
    assert plain.activation_numel == acts
    assert plain.full_forward_flops == 2 * 398_660_608  # 398,131,200 conv + 529,408 FC MACs
    assert plain.full_params == 20_024_384 + 530_442
    # Default: BN after every conv adds 2·C_out parameters (and buffers); FLOPs do not change.
    with_bn = build("vgg19", split)
    assert count_params(with_bn.client) == conv_params + bn_params


def test_vgg19_pool_on_client_option_gives_4x_activations():
    for split, (_, _, acts, _) in VGG19_TABLE.items():
        assert math.prod(build("vgg19", split, vgg19_pool_on_client=False).activation_shape) == 4 * acts


# --- GAS Table 5: ResNet18 and ViT-small (GAS spec §9.5) ------------------------------------------------


def test_resnet18_splits_after_first_stage():
    model = build("resnet18")
    assert model.split == "layer1"
    assert model.activation_shape == (64, 8, 8)  # ImageNet stem [A]
    assert count_params(model.full()) == 11_181_642
    cifar = build("resnet18", resnet18_stem="cifar")
    assert cifar.activation_shape == (64, 32, 32)
    assert count_params(cifar.full()) == 11_173_962


def test_vit_small_shapes():
    model = build("vit_small")
    assert model.split == "block1"
    assert model.activation_shape == (65, 512)  # class token + 8×8 patches of 4×4, width 512
    assert len(model.server) == 6  # 5 Transformer layers + head
    assert model.server.block2.mlp[0].out_features == 512
    assert model.server.block2.attn.heads == 8
    assert count_params(model.full()) == 9_532_938
    assert build("vit_small", vit_patch_size=8, vit_embed_dim=256).activation_shape == (17, 256)


# --- CSE-FSL (CSE-FSL spec §4.2, Tables III and IV) -----------------------------------------------------


@pytest.mark.parametrize(
    ("aux", "params"),
    [
        ("mlp", 23_050),
        ("cnn_mlp_54", 22_960),
        ("cnn_mlp_27", 11_485),
        ("cnn_mlp_14", 5_960),
        ("cnn_mlp_7", 2_985),
    ],
)
def test_cse_fsl_cifar10_counts(aux, params):
    model = build("cse_fsl_cifar10", size=24, aux=aux)
    assert model.activation_shape == (64, 6, 6)
    assert count_params(model.client) == 107_328
    assert count_params(model.server) == 960_970
    assert count_params(model.aux) == params


@pytest.mark.parametrize(
    ("aux", "params"),
    [
        ("mlp", 571_454),
        ("cnn_mlp_64", 575_614),
        ("cnn_mlp_32", 287_838),
        ("cnn_mlp_8", 72_006),
        ("cnn_mlp_2", 18_048),
    ],
)
def test_cse_fsl_femnist_counts(aux, params):
    model = build("cse_fsl_femnist", c=1, size=28, classes=62, aux=aux)
    assert model.activation_shape == (64, 12, 12)
    assert count_params(model.client) == 18_816
    assert count_params(model.server) == 1_187_774
    assert count_params(model.aux) == params


def test_cse_fsl_cifar10_paper_pooling_keeps_shapes_and_counts():
    """§VI-A: each conv "followed by a 2×2 max-pooling and a local response norm layer" (the code: 3×3/2
    pools, LRN before the second); both map 24 -> 12 -> 6."""
    code = build("cse_fsl_cifar10", size=24, aux="cnn_mlp_54", meta=False)
    paper = build("cse_fsl_cifar10", size=24, aux="cnn_mlp_54", meta=False, cse_fsl_cifar10_pool="paper")
    assert [n for n, _ in code.client.named_children()][-2:] == ["lrn2", "pool2"]
    assert [n for n, _ in paper.client.named_children()] == [
        "conv1", "relu1", "pool1", "lrn1", "conv2", "relu2", "pool2", "lrn2"
    ]  # fmt: skip
    assert (paper.client.pool1.kernel_size, paper.client.pool1.stride) == (2, 2)
    assert paper.activation_shape == code.activation_shape == (64, 6, 6)
    assert [count_params(m) for m in (paper.client, paper.server, paper.aux)] == [107_328, 960_970, 22_960]
    x = torch.randn(2, 3, 24, 24)
    paper.client.load_state_dict(code.client.state_dict())  # same parameters, other function
    assert not torch.allclose(paper.client(x), code.client(x))
    # by hand: block 1 of the paper's order is LRN(maxpool2x2(relu(conv1 x)))
    block1 = paper.client.lrn1(torch.nn.functional.max_pool2d(torch.relu(paper.client.conv1(x)), 2))
    torch.testing.assert_close(paper.client[:4](x), block1)


@pytest.mark.parametrize("aux", ["cnn_mlp_54", "cnn_mlp_7"])
def test_aux_activation_none_drops_the_relu_and_keeps_counts(aux):
    relu = build("cse_fsl_cifar10", size=24, aux=aux)
    plain = build("cse_fsl_cifar10", size=24, aux=aux, aux_activation="none")
    assert [type(m).__name__ for m in relu.aux] == ["Conv2d", "ReLU", "Flatten", "Linear"]
    assert [type(m).__name__ for m in plain.aux] == ["Conv2d", "Flatten", "Linear"]
    assert count_params(plain.aux) == count_params(relu.aux)


def test_cse_fsl_femnist_relu_option_keeps_counts():
    model = build("cse_fsl_femnist", c=1, size=28, classes=62, cse_fsl_femnist_relu=False)
    assert [n for n, _ in model.client.named_children()] == ["conv1", "conv2", "pool", "drop1"]
    assert count_params(model.client) == 18_816


# --- FedASMU (FedASMU spec §4.2, A17, A18) --------------------------------------------------------------


def test_fedasmu_cnn_counts():
    model = build("fedasmu_cnn")
    assert [count_params(m) for m in (model.client.conv1, model.client.conv2, model.server.dense1)] == [
        832,
        8_224,
        288_010,
    ]
    assert count_params(model.full()) == 297_066
    assert build("fedasmu_cnn", classes=100).server.dense1.out_features == 100  # CIFAR-100 [A]


def test_lenet5_counts():
    assert count_params(build("lenet5").full()) == 62_006  # 456 + 2,416 + 48,120 + 10,164 + 850
    fmnist = build("lenet5", c=1, size=28)
    assert fmnist.activation_shape == (16, 5, 5)  # 28×28 padded to 32 by the first conv
    assert count_params(fmnist.full()) == 61_706


def test_resnet20_counts():
    assert count_params(build("resnet20").full()) == 269_722  # "0.27M" (He et al. 2016, option A)
    tiny = build("resnet20", size=64, classes=200)
    assert tiny.activation_shape == (16, 64, 64)
    assert count_params(tiny.full()) == 269_722 - 650 + 65 * 200


def test_vgg11_counts():
    assert count_params(build("vgg11").full()) == 9_231_114  # ≈ 37 MB of float32 (FedASMU spec §6)
    assert count_params(build("vgg11", vgg11_batch_norm=False).full()) == 9_231_114 - 2 * 2_752
