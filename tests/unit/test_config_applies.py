"""``option(applies=...)``: which options a scenario's other values leave unread, and that the built-in
declarations are true (changing an unread option changes no partition, device table or model)."""

import dataclasses
import functools
import math

import numpy as np
import pytest
import torch

from raysfl.config import (
    Above,
    Below,
    default_problems,
    describe_options,
    diagnostic_options,
    option,
    option_meta,
    to_dict,
    unused_options,
)
from raysfl.data.config import DataConfig
from raysfl.data.partition import partition_dataset
from raysfl.models.config import ModelConfig
from raysfl.models.zoo import build_split_model
from raysfl.scenario import Scenario
from raysfl.system.config import SystemConfig
from raysfl.system.profiles import draw_devices


@dataclasses.dataclass(frozen=True)
class _Link:
    kind: str = option("fixed", choices=("fixed", "wireless", "uniform"))
    radius_m: float = option(1000.0, applies={"kind": ("wireless",)})
    top_bps: float = option(1e7, applies={"kind": ("wireless", "uniform")})
    power_w: float = option(0.2)


@dataclasses.dataclass(frozen=True)
class _System:
    link: _Link = option(factory=_Link)
    server_flops_per_s: float = option(1e12)


def test_an_option_is_unused_when_its_sibling_takes_another_value():
    assert unused_options(_Link, {"kind": "fixed"}) == ["radius_m", "top_bps"]
    assert unused_options(_Link, {"kind": "uniform"}) == ["radius_m"]
    assert unused_options(_Link, {"kind": "wireless"}) == []


def test_a_missing_sibling_reads_as_its_default_and_sections_are_walked_with_their_path():
    assert unused_options(_Link, {}) == ["radius_m", "top_bps"]  # kind defaults to fixed
    assert unused_options(_System, {"link": {"kind": "uniform"}}, "system.") == ["system.link.radius_m"]


def test_a_condition_naming_no_sibling_or_a_value_it_never_takes_is_a_declaration_problem():
    @dataclasses.dataclass(frozen=True)
    class Bad:
        kind: str = option("a", choices=("a", "b"))
        x: float = option(1.0, applies={"knd": ("a",)})
        y: float = option(1.0, applies={"kind": ("c",)})
        z: float = option(1.0, applies={"z": (1.0,)})

    problems = default_problems(Bad)
    assert len(problems) == 3
    assert "Bad.x (applies): 'knd' is not another option of" in problems[0]
    assert "Bad.y (applies): kind is never ['c']; it is one of ['a', 'b']" in problems[1]
    assert "Bad.z (applies): 'z' is not another option of" in problems[2]


def test_a_number_condition_reads_an_option_only_beyond_its_bound():
    @dataclasses.dataclass(frozen=True)
    class Lossy:
        dropout: float = option(0.0, ge=0, lt=1)
        bits: int = option(32, ge=1, le=32)
        granularity: str = option("element", applies={"dropout": Above(0.0)})
        scope: str = option("global", applies={"bits": Below(32)})

    assert unused_options(Lossy, {}) == ["granularity", "scope"]
    assert unused_options(Lossy, {"dropout": 0.3, "bits": 8}) == []
    assert unused_options(Lossy, {"dropout": 0.3, "bits": 32}) == ["scope"]
    assert default_problems(Lossy) == []
    lines = describe_options(Lossy)
    assert lines[2] == "granularity: str = 'element' (read only when dropout > 0)"
    assert lines[3] == "scope: str = 'global' (read only when bits < 32)"

    @dataclasses.dataclass(frozen=True)
    class Bad:
        kind: str = option("a", choices=("a", "b"))
        x: float = option(1.0, applies={"kind": Above(0)})

    (problem,) = default_problems(Bad)
    assert problem.endswith("Bad.x (applies): kind is not a number; > 0 cannot hold for it")


def test_every_built_in_condition_is_well_formed():
    assert default_problems(Scenario) == []


def test_a_default_scenario_leaves_the_other_kinds_options_unread():
    unused = unused_options(Scenario, to_dict(Scenario()))
    # defaults: shard partition, fashion-mnist, alexnet, uniform compute, wireless link, virtual clock
    assert "data.alpha" in unused and "data.shards_per_client" not in unused
    assert "data.synthetic_train" in unused
    assert "model.alexnet_width_divisor" not in unused and "model.vit_patch_size" in unused
    assert "system.compute.ratio" in unused and "system.compute.min_flops_per_s" not in unused
    assert "system.link.uplink_bps" in unused and "system.link.radius_m" not in unused
    assert "engine.time_scale" in unused


def _applies(cls: type) -> dict[str, dict]:
    return {f.name: dict(option_meta(f).applies) for f in dataclasses.fields(cls) if option_meta(f).applies}


def other_value(cls: type, name: str):
    """A valid value of field ``name`` other than its default (also the method-parameter test's)."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    meta, default = option_meta(f), f.default
    if meta.choices:
        return next(c for c in meta.choices if c != default)
    if isinstance(default, bool):
        return not default
    if isinstance(default, float) and math.isinf(default):
        return 20.0  # a dBm power given instead of the W one
    if isinstance(default, float) and meta.le is not None and default * 2 + 1 > meta.le:
        return default / 2  # a bounded rate or clamp (ε ≤ 1, β_max ≤ 1)
    return type(default)(default * 2 + 1)


def _unmet(cls: type, name: str) -> list[dict]:
    """Each value of ``name``'s sibling that leaves it unread (its one condition; the kinds that need a
    trace file or a writers' dataset aside)."""
    ((other, allowed),) = _applies(cls)[name].items()
    f = next(f for f in dataclasses.fields(cls) if f.name == other)
    return [{other: c} for c in option_meta(f).choices if c not in allowed and c not in ("trace", "natural")]


@pytest.mark.parametrize("name", sorted(n for n in _applies(DataConfig) if not n.startswith("synthetic_")))
def test_an_unread_data_option_changes_no_partition(name):
    labels = np.repeat(np.arange(10), 60)
    for unmet in _unmet(DataConfig, name):
        base = DataConfig(dataset="fashion-mnist", **unmet)
        changed = dataclasses.replace(base, **{name: other_value(DataConfig, name)})
        a = partition_dataset(labels, base, 20, np.random.default_rng(0))
        b = partition_dataset(labels, changed, 20, np.random.default_rng(0))
        assert [p.tolist() for p in a.indices] == [p.tolist() for p in b.indices], unmet


def _system(section: str, **values) -> SystemConfig:
    return SystemConfig(**{section: dataclasses.replace(getattr(SystemConfig(), section), **values)})


@pytest.mark.parametrize(
    ("section", "name"),
    [("compute", n) for n in sorted(_applies(type(SystemConfig().compute)))]
    + [("link", n) for n in sorted(_applies(type(SystemConfig().link)))],
)
def test_an_unread_system_option_changes_no_device_table(section, name):
    cls = type(getattr(SystemConfig(), section))
    for unmet in _unmet(cls, name):
        base = _system(section, **unmet)
        changed = _system(section, **unmet, **{name: other_value(cls, name)})
        a = draw_devices(base, 12, np.random.default_rng(3))
        b = draw_devices(changed, 12, np.random.default_rng(3))
        for column in ("flops_per_s", "uplink_bps", "downlink_bps", "distance_m"):
            x, y = getattr(a, column), getattr(b, column)
            assert (x is None and y is None) or np.array_equal(x, y, equal_nan=True), (unmet, column)


@functools.cache
def _built(cfg: ModelConfig) -> str:
    """The split model's layers (types, shapes, the cut), built on the meta device: no weights."""
    for channels, size in ((3, 32), (1, 28)):
        try:
            with torch.device("meta"):
                model = build_split_model(cfg, channels, size, 10, seed=0)
        except ValueError:
            continue
        return f"{model.client!r}|{model.server!r}|{model.activation_shape}"
    raise AssertionError(f"{cfg.name} builds for neither 3x32x32 nor 1x28x28 inputs")


@pytest.mark.parametrize("name", sorted(_applies(ModelConfig)))
def test_an_unread_model_option_changes_no_layer(name):
    for unmet in _unmet(ModelConfig, name):
        base = ModelConfig(**unmet)
        changed = dataclasses.replace(base, **{name: other_value(ModelConfig, name)})
        assert _built(base) == _built(changed), unmet


def test_a_read_model_option_changes_the_layers_this_test_compares():
    """The check above can fail: the options it compares do show in the built layers of their model."""
    base = ModelConfig(name="vgg19", vgg19_width_divisor=8)
    assert _built(base) != _built(dataclasses.replace(base, vgg19_batch_norm=False))
    femnist = ModelConfig(name="cse_fsl_femnist")
    assert _built(femnist) != _built(dataclasses.replace(femnist, cse_fsl_femnist_relu=False))


@dataclasses.dataclass(frozen=True)
class _Meter:
    every: int = option(0, ge=0, diagnostic=True)
    rows: int = option(64, ge=1, applies={"every": Above(0)})
    lr: float = option(0.1, gt=0)
    lr_decay: float = option(1.0, applies={"every": Above(0), "lr": Above(0.05)})


@dataclasses.dataclass(frozen=True)
class _WithMeter:
    meter: _Meter = option(factory=_Meter)
    seed: int = option(0, diagnostic=False)


def test_diagnostic_options_are_the_declared_ones_and_those_read_only_under_them():
    """``rows`` is read only when the meter is on, so it changes no number either; ``lr_decay`` also
    needs a read option, so it is not diagnostic."""
    assert diagnostic_options(_Meter) == ["every", "rows"]
    assert diagnostic_options(_WithMeter, "x.") == ["x.meter.every", "x.meter.rows"]
    assert diagnostic_options(_System) == []
