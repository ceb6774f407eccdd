"""Scenario loading: every shipped file validates; bad input names the field and the allowed values."""

from pathlib import Path

import pytest

from raysfl.config import ConfigError, build, dumps_toml, read_toml
from raysfl.scenario import load_scenario, scenario_from_dict, scenario_to_dict

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(p for p in (ROOT / "scenarios").rglob("*.toml") if not p.name.endswith(".sweep.toml"))


def test_there_are_scenarios():
    assert any(p.name == "default.toml" for p in SCENARIOS)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_scenario_validates(path):
    sc = load_scenario(path)
    assert sc.name


def test_default_scenario_is_what_the_issue_asks():
    sc = load_scenario(ROOT / "scenarios" / "default.toml")
    assert (sc.algorithm.name, sc.data.dataset, sc.data.partition, sc.data.shards_per_client) == (
        "gas",
        "fashion-mnist",
        "shard",
        2,
    )
    assert (sc.federation.num_clients, sc.federation.active_clients) == (20, 10)
    assert (sc.train.local_iterations, sc.train.batch_size) == (20, 32)
    assert (sc.model.name, sc.model.split) == ("alexnet", "L2")
    assert sc.system.compute.min_flops_per_s == 1e9 and sc.system.compute.max_flops_per_s == 1e10


def _problems(data, overrides=()):
    with pytest.raises(ConfigError) as err:
        scenario_from_dict(data, overrides)
    return err.value.problems


def test_unknown_key_suggests_the_closest_name():
    (p,) = _problems({"train": {"local_iteratons": 5}})
    assert p == "train.local_iteratons: unknown key (did you mean 'local_iterations'?)"


def test_all_problems_are_reported_at_once():
    problems = _problems(
        {"seed": -1, "train": {"lr": "fast"}, "data": {"partition": "random"}, "model": {"splitt": "L2"}}
    )
    text = "\n".join(problems)
    assert "seed: -1 is out of range; it must be >= 0" in text
    assert "train.lr: expected a number, got 'fast'" in text
    assert (
        "data.partition: 'random' is not allowed; choose one of 'iid', 'shard', 'dirichlet', 'natural'"
        in text
    )
    assert "model.splitt: unknown key (did you mean 'split'?)" in text
    assert len(problems) == 4


def test_cross_section_checks():
    problems = _problems({"federation": {"num_clients": 5, "active_clients": 8}})
    assert any("federation.active_clients: 8 exceeds federation.num_clients (5)" in p for p in problems)
    problems = _problems({"federation": {"num_clients": 7}, "data": {"shards_per_client": 2}})
    assert any(
        p.startswith("data.shards_per_client:") and "multiple of the 10 classes" in p for p in problems
    )
    problems = _problems({"model": {"split": "L7"}})
    assert any(p.startswith("model.split:") and "'L2'" in p for p in problems)


def test_a_crop_larger_than_the_images_is_refused_at_load_time():
    """It used to pass validation and fail with a traceback when the first batch was cut."""
    (p,) = _problems({"data": {"crop_size": 100}})
    assert p == "data.crop_size: 100 exceeds the 28×28 images of fashion-mnist; use at most 28 (0 = no crop)"
    assert scenario_from_dict({"data": {"crop_size": 28}}).data.crop_size == 28


@pytest.mark.parametrize("method", ["gas", "fedavg", "minibatch_sfl", "lightweight_fedsl", "fedasmu"])
def test_an_auxiliary_head_is_refused_by_methods_that_train_none(method):
    """It was built and never trained: the run looked the same as without it."""
    problems = _problems({"model": {"aux": "mlp"}, "algorithm": {"name": method}})
    assert any(p.startswith(f"model.aux: {method!r} trains no auxiliary head") for p in problems)
    doc = {"model": {"name": "cse_fsl_cifar10", "aux": "mlp"}, "algorithm": {"name": "cse_fsl"}}
    assert scenario_from_dict({**doc, "data": {"dataset": "cifar10"}}).model.aux == "mlp"


def test_unknown_algorithm_and_bad_algorithm_params():
    assert any(
        "algorithm.name: 'gass' is not a known method (did you mean 'gas'?)" in p
        for p in _problems({"algorithm": {"name": "gass"}})
    )
    problems = _problems({"algorithm": {"params": {"covariance": "dense", "q_s": 0}}})
    assert "algorithm.params.covariance: 'dense' is not allowed; choose one of 'full', 'diagonal'" in problems
    assert "algorithm.params.q_s: 0 is out of range; it must be >= 1" in problems


def test_overrides_use_dotted_keys_and_toml_values():
    sc = scenario_from_dict({}, ["train.lr=0.05", "algorithm.params.generate=false", "data.dataset=mnist"])
    assert sc.train.lr == 0.05 and sc.params.generate is False and sc.data.dataset == "mnist"
    with pytest.raises(ConfigError, match="expected dotted.key=value"):
        scenario_from_dict({}, ["train.lr"])


def test_resolved_scenario_round_trips_through_toml(tmp_path):
    sc = load_scenario(ROOT / "scenarios" / "default.toml")
    path = tmp_path / "resolved.toml"
    path.write_text(dumps_toml(scenario_to_dict(sc)))
    again = load_scenario(path)
    assert scenario_to_dict(again) == scenario_to_dict(sc)


def test_malformed_toml_names_the_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[train\nlr = 1\n")
    with pytest.raises(ConfigError) as err:
        load_scenario(bad)
    assert err.value.source == str(bad) and "malformed TOML" in err.value.problems[0]
    with pytest.raises(ConfigError, match="not found"):
        read_toml(tmp_path / "missing.toml")


def test_build_rejects_wrong_nested_types():
    from raysfl.system.config import SystemConfig

    with pytest.raises(ConfigError) as err:
        build(SystemConfig, {"compute": 3, "link": {"radius_m": "far"}}, "system")
    assert err.value.problems == [
        "system.compute: expected a table of options, got 3",
        "system.link.radius_m: expected a number, got 'far'",
    ]


def test_gas_shared_momentum_needs_one_pool():
    problems = _problems({"algorithm": {"params": {"optimizer_state": "shared"}}, "engine": {"pools": 2}})
    assert any(p.startswith("algorithm.params.optimizer_state: 'shared'") for p in problems)
    assert scenario_from_dict(
        {"algorithm": {"params": {"optimizer_state": "shared"}}}
    ).params.optimizer_state == ("shared")


def test_params_are_built_once_when_the_scenario_loads():
    sc = scenario_from_dict({"algorithm": {"name": "fedasync", "params": {"alpha": 0.3}}})
    assert "params" in vars(sc)  # built by the load, not on first use
    assert sc.params is sc.params and sc.params.alpha == 0.3
