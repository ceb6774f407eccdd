"""The zoo registry, config validation, determinism and exactness of the split."""

import dataclasses
import doctest
import subprocess
import sys

import pytest
import torch

import raysfl.models.heads
import raysfl.models.split
import raysfl.models.zoo
from raysfl.config import ConfigError, build
from raysfl.data.config import DATASET_NAMES
from raysfl.models import (
    AUX_HEADS,
    MODEL_NAMES,
    MODELS,
    ModelConfig,
    build_split_model,
    validate_model_config,
)
from raysfl.models.flops import count_params


def test_registry_is_consistent():
    assert tuple(MODELS) == MODEL_NAMES
    for name, entry in MODELS.items():
        assert entry.name == name
        assert entry.default_split in entry.splits
        assert len(set(entry.splits)) == len(entry.splits)
        assert set(entry.aux_heads) <= set(AUX_HEADS)
        assert entry.source and entry.description and entry.inputs
        assert entry.default_dataset in DATASET_NAMES


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_entry_builds_every_split_on_its_source_inputs(name):
    entry = MODELS[name]
    classes = 62 if name == "cse_fsl_femnist" else 10
    for c, h, w in entry.inputs:
        assert h == w
        for split in entry.splits:  # validation builds on the meta device: shapes only, no memory
            for aux in ("", *entry.aux_heads):
                assert (
                    validate_model_config(ModelConfig(name=name, split=split, aux=aux), c, h, classes) == []
                )
    c, size, _ = entry.inputs[0]
    # Run for real, except the two big VGGs (33M and 21M parameters to initialise): their layers are the same
    # kinds as VGG-11's, so on the meta device they check shapes only.
    with torch.device("meta" if name in ("vgg16_bn", "vgg19") else "cpu"):
        model = build_split_model(ModelConfig(name=name), c, size, classes, seed=1)
        x = torch.randn(2, c, size, size)
    assert model.split == entry.default_split
    assert model.input_shape == entry.inputs[0]
    full = model.full().eval()
    with torch.no_grad():
        act = model.client(x)
        assert tuple(act.shape[1:]) == model.activation_shape
        if not x.is_meta:
            assert torch.equal(model.server(act), full(x))  # the split is exact
        assert full(x).shape == (2, classes)


def test_full_model_does_not_depend_on_split_or_aux():
    """Same seed ⇒ the same full model whatever the cut; the auxiliary head is drawn after the layers."""
    a = build_split_model(ModelConfig(name="alexnet", split="L1"), 3, 32, 10, seed=7)
    b = build_split_model(ModelConfig(name="alexnet", split="L4", aux="mlp"), 3, 32, 10, seed=7)
    sa, sb = a.full().state_dict(), b.full().state_dict()
    flat_a = torch.cat([v.flatten() for v in sa.values()])
    flat_b = torch.cat([v.flatten() for v in sb.values()])
    assert torch.equal(flat_a, flat_b)


@pytest.mark.parametrize("name", ["alexnet", "vit_small", "resnet20", "cse_fsl_cifar10"])
def test_parameters_are_deterministic_in_the_seed(name):
    cfg = ModelConfig(name=name, aux="mlp", vit_embed_dim=64)  # a narrow ViT: same code, less to initialise
    c, size, _ = MODELS[name].inputs[0]

    def params(seed):
        m = build_split_model(cfg, c, size, 10, seed=seed)
        return [p.detach().clone() for part in (m.client, m.server, m.aux) for p in part.parameters()]

    one, same, other = params(3), params(3), params(4)
    assert all(torch.equal(x, y) for x, y in zip(one, same, strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(one, other, strict=True))


def test_build_leaves_global_rng_untouched():
    torch.manual_seed(123)
    state = torch.get_rng_state()
    build_split_model(ModelConfig(name="vgg11"), 3, 32, 10, seed=0)
    assert torch.equal(torch.get_rng_state(), state)


def test_validation_names_the_field_and_lists_choices():
    cfg = ModelConfig(name="alexnet", split="L7", aux="cnn_mlp_54")
    assert validate_model_config(cfg, 3, 32, 10) == [
        "model.split: 'L7' is not a split of alexnet; choose one of 'L1', 'L2', 'L3', 'L4'",
        "model.aux: 'cnn_mlp_54' is not an auxiliary head of alexnet; choose one of 'mlp'",
    ]
    with pytest.raises(ConfigError) as err:
        build_split_model(cfg, 3, 32, 10, seed=0)
    assert err.value.problems[0].startswith("model.split: 'L7'")


def test_validation_rejects_inputs_a_model_cannot_take():
    (problem,) = validate_model_config(ModelConfig(name="vgg16_bn"), 1, 28, 10)
    assert problem.startswith("model.name: vgg16_bn cannot take 1×28×28 inputs (any channels; H = W >= 32")
    (problem,) = validate_model_config(ModelConfig(name="alexnet"), 3, 8, 10)
    assert problem.startswith("model.name: alexnet cannot take 3×8×8 inputs")
    assert validate_model_config(ModelConfig(name="alexnet"), 3, 12, 10) == []
    assert validate_model_config(ModelConfig(name="vit_small", vit_patch_size=5), 3, 32, 10) == [
        "model.vit_patch_size: 5 does not divide the image size 32"
    ]
    assert validate_model_config(ModelConfig(name="vit_small", vit_embed_dim=100), 3, 32, 10) == [
        "model.vit_embed_dim: 100 is not a multiple of the 8 heads"
    ]
    assert validate_model_config(ModelConfig(name="lenet5"), 3, 32, 0) == [
        "model.name: lenet5 needs at least 1 for the dataset's classes, got 0"
    ]


def test_build_reports_what_validation_reports():
    # build_split_model checks while building on the CPU, validation on the meta device: the same problems,
    # word for word, for every model and input size (3 channels: every zoo model takes any channel count).
    configs = [ModelConfig(name=name) for name in MODEL_NAMES]
    configs += [
        ModelConfig(name="vit_small", vit_patch_size=5),
        ModelConfig(name="cse_fsl_cifar10", aux="cnn_mlp_14"),
    ]
    rejected = set()
    for cfg in configs:
        for size in (1, 2, 3, 5, 7, 9, 13, 17, 31):
            expected = validate_model_config(cfg, 3, size, 10)
            if expected:
                rejected.add(cfg.name)
                with pytest.raises(ConfigError) as err:
                    build_split_model(cfg, 3, size, 10, seed=0)
                assert err.value.problems == expected
            else:
                build_split_model(cfg, 3, size, 10, seed=0)
    assert {"alexnet", "vgg16_bn", "vit_small"} <= rejected  # layers that cannot take small inputs


def test_a_runtime_error_the_meta_build_does_not_repeat_is_not_called_a_shape_problem(monkeypatch):
    # A CPU-only failure of a layer (the way an out-of-memory allocation fails) must surface as itself,
    # not as "cannot take these inputs": the build confirms shape errors on the meta device.
    def alexnet_that_runs_out_of_memory(cfg, c, h, k):
        if not torch.empty(0).is_meta:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory")
        return MODELS["alexnet"].builder(cfg, c, h, k)

    entry = dataclasses.replace(
        MODELS["alexnet"], name="oom_alexnet", builder=alexnet_that_runs_out_of_memory
    )
    monkeypatch.setitem(MODELS, "oom_alexnet", entry)
    cfg = ModelConfig(name="oom_alexnet")
    assert validate_model_config(cfg, 3, 32, 10) == []
    with pytest.raises(RuntimeError, match="can't allocate memory") as err:
        build_split_model(cfg, 3, 32, 10, seed=0)
    assert not isinstance(err.value, ConfigError)
    # a real shape problem is still a ConfigError naming the field, worded as validation words it
    with pytest.raises(ConfigError) as shape_err:
        build_split_model(cfg, 3, 8, 10, seed=0)
    assert shape_err.value.problems == validate_model_config(cfg, 3, 8, 10)
    assert shape_err.value.problems[0].startswith("model.name: oom_alexnet cannot take 3×8×8 inputs")


def test_build_does_not_touch_the_meta_device():
    # A process's first meta-device operations import torch._dynamo (about 0.9 s); an FL server only builds.
    script = (
        "import sys, torch\n"
        "before = 'torch._dynamo' in sys.modules\n"
        "from raysfl.models import ModelConfig, build_split_model\n"
        "build_split_model(ModelConfig(name='alexnet', aux='mlp'), 3, 32, 10, seed=0)\n"
        "print(before, 'torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    before, after = out.stdout.split()
    if before == "True":
        pytest.skip("this torch imports torch._dynamo on import")
    assert after == "False"


def test_cnn_mlp_head_needs_a_feature_map():
    with pytest.raises(ValueError, match=r"needs a \(C, H, W\) activation"):
        AUX_HEADS["cnn_mlp_7"]((65, 512), 10)


def test_model_config_is_built_from_a_table():
    cfg = build(ModelConfig, {"name": "vgg19", "split": "Lc4", "vgg19_pool_on_client": False}, path="model")
    assert (cfg.name, cfg.split, cfg.vgg19_pool_on_client) == ("vgg19", "Lc4", False)
    with pytest.raises(ConfigError) as err:
        build(ModelConfig, {"name": "alexnt", "resnet18_stem": "big"}, path="model")
    assert err.value.problems[0].startswith("model.name: 'alexnt' is not allowed; choose one of 'alexnet'")
    assert err.value.problems[1].startswith("model.resnet18_stem: 'big' is not allowed")


def test_aux_head_maps_activation_to_logits():
    model = build_split_model(ModelConfig(name="cse_fsl_cifar10", aux="cnn_mlp_14"), 3, 24, 10, seed=0)
    assert model.aux_name == "cnn_mlp_14"
    assert model.aux(model.client(torch.randn(3, 3, 24, 24))).shape == (3, 10)
    assert count_params(model.aux) == 5_960


@pytest.mark.parametrize("module", [raysfl.models.split, raysfl.models.heads, raysfl.models.zoo])
def test_docstring_examples(module):
    assert doctest.testmod(module).failed == 0
