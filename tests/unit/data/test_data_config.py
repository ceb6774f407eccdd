"""DataConfig: defaults, validation through raysfl.config.build, documentation of every option."""

from __future__ import annotations

import dataclasses

import pytest

from raysfl.config import ConfigError, build, option_meta
from raysfl.data import DATASETS, DataConfig


def test_defaults_match_the_brief() -> None:
    cfg = DataConfig()
    assert (cfg.dataset, cfg.partition, cfg.shards_per_client, cfg.alpha) == (
        "fashion-mnist",
        "shard",
        2,
        0.1,
    )
    assert (cfg.min_client_size, cfg.augment, cfg.normalization, cfg.crop_size) == (10, "auto", "standard", 0)
    assert cfg.data_dir == "" and cfg.download is True


def test_every_option_is_documented() -> None:
    for f in dataclasses.fields(DataConfig):
        assert option_meta(f).doc, f"DataConfig.{f.name} has no doc"


def test_dataset_choices_are_the_registry() -> None:
    meta = option_meta(next(f for f in dataclasses.fields(DataConfig) if f.name == "dataset"))
    assert meta.choices == tuple(DATASETS)


def test_build_reports_every_bad_value() -> None:
    with pytest.raises(ConfigError) as err:
        build(DataConfig, {"dataset": "imagenet", "alpha": 0, "partiton": "iid"}, path="data")
    text = str(err.value)
    assert "data.dataset" in text and "data.alpha" in text and "did you mean 'partition'" in text


def test_natural_partition_needs_femnist() -> None:
    with pytest.raises(ConfigError, match="natural"):
        build(DataConfig, {"dataset": "cifar10", "partition": "natural"}, path="data")
    assert build(DataConfig, {"dataset": "femnist", "partition": "natural"}).partition == "natural"


def test_a_dirichlet_minimum_of_zero_is_refused() -> None:
    """With 0 a client may get no sample, and its first minibatch divided by zero deep in the batching."""
    with pytest.raises(ConfigError, match="data.min_client_size"):
        build(DataConfig, {"partition": "dirichlet", "min_client_size": 0}, path="data")


@pytest.mark.parametrize(
    "name, kind, mean, std",
    [
        ("fashion-mnist", "standard", (0.2860,), (0.3530,)),  # shared/data README
        ("fashion-mnist", "gas-code", (0.286,), (0.3205,)),  # GAS code, specs/gas.md §10.11
        ("fashion-mnist", "half", (0.5,), (0.5,)),  # CSE-FSL code
        ("cifar10", "standard", (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
        ("cifar10", "gas-code", (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)),
        ("cifar10", "half", (0.5,) * 3, (0.5,) * 3),
        ("mnist", "gas-code", (0.1307,), (0.3081,)),  # no GAS constants: the standard ones [A]
    ],
)
def test_normalization_constants(name, kind, mean, std):
    assert DATASETS[name].normalization(kind) == (mean, std)
