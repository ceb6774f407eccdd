"""Renamed options: old keys (config.aliases) and old value spellings (option synonyms) keep working."""

import dataclasses
from dataclasses import dataclass

import pytest

from raysfl.algorithms.common.staleness import STALENESS_FUNCTIONS, StalenessOptions
from raysfl.algorithms.fedasync import FedAsyncParams
from raysfl.algorithms.fedbuff import FedBuffParams
from raysfl.config import ConfigError, aliases, build, key_aliases, option, option_meta
from raysfl.scenario import scenario_from_dict


@aliases(rate="rate_bps", size="size_b")
@dataclass(frozen=True)
class Link:
    size_b: int = option(doc="required size")
    rate_bps: float = option(1e6, gt=0, doc="fixed rate")
    kind: str = option("fixed", choices=("fixed", "wireless"), synonyms={"static": "fixed"}, doc="link model")


def problems(data, path="link"):
    with pytest.raises(ConfigError) as err:
        build(Link, data, path)
    return err.value.problems


def test_an_old_key_builds_the_same_value_as_the_new_one():
    assert build(Link, {"rate": 5.0, "size": 3}) == build(Link, {"rate_bps": 5.0, "size_b": 3})
    assert key_aliases(Link) == {"rate": "rate_bps", "size": "size_b"}


def test_an_old_key_satisfies_a_required_field():
    assert build(Link, {"size": 3}).size_b == 3
    assert problems({}) == ["link.size_b: required key is missing"]


def test_both_keys_given_is_one_error_naming_both_with_every_other_problem():
    got = problems({"rate": 5.0, "rate_bps": 6.0, "size_b": 1, "kind": "radio"})
    assert got == [
        "link.rate and link.rate_bps name the same option ('rate' is the old name of 'rate_bps'); "
        "give only 'rate_bps'",
        "link.kind: 'radio' is not allowed; choose one of 'fixed', 'wireless'",
    ]


def test_a_bad_value_under_an_old_key_is_named_as_written():
    assert problems({"rate": -1.0, "size_b": 1}) == ["link.rate: -1.0 is out of range; it must be > 0"]


def test_a_value_synonym_builds_as_the_value_it_stands_for():
    assert build(Link, {"size_b": 1, "kind": "static"}).kind == "fixed"


def test_aliases_must_name_a_field_and_not_shadow_one():
    with pytest.raises(TypeError, match="'nope' is not one of its fields"):
        aliases(old="nope")(Link)
    with pytest.raises(TypeError, match="is itself a field"):
        aliases(kind="rate_bps")(Link)
    with pytest.raises(TypeError, match="must map to values of choices"):
        option("a", choices=("a", "b"), synonyms={"x": "c"})


def test_fedasync_and_fedbuff_share_one_staleness_group():
    shared = {f.name for f in dataclasses.fields(StalenessOptions)}
    assert shared == {"staleness", "staleness_a", "staleness_b"}
    for cls in (FedAsyncParams, FedBuffParams):
        assert issubclass(cls, StalenessOptions)
        meta = {f.name: option_meta(f) for f in dataclasses.fields(cls) if f.name in shared}
        assert meta["staleness"].choices == STALENESS_FUNCTIONS
        assert meta == {f.name: option_meta(f) for f in dataclasses.fields(StalenessOptions)}
    assert (FedAsyncParams().staleness, FedBuffParams().staleness) == ("polynomial", "constant")


def _params(name, params):
    doc = {
        "name": "alias",
        "data": {"dataset": "synthetic", "partition": "iid"},
        "model": {"name": "lenet5"},
        "federation": {"num_clients": 3, "active_clients": 2},
        "algorithm": {"name": name, "params": params},
    }
    return scenario_from_dict(doc).params


def test_fedasync_keeps_its_old_keys_a_and_b():
    old = _params("fedasync", {"staleness": "hinge", "a": 2.0, "b": 3})
    assert old == _params("fedasync", {"staleness": "hinge", "staleness_a": 2.0, "staleness_b": 3})
    with pytest.raises(ConfigError, match=r"algorithm\.params\.b and algorithm\.params\.staleness_b"):
        _params("fedasync", {"b": 3, "staleness_b": 3})


def test_fedbuffs_none_is_the_constant_staleness_function():
    assert _params("fedbuff", {"staleness": "none"}) == _params("fedbuff", {"staleness": "constant"})
    assert _params("fedbuff", {}).staleness == "constant"
