"""A checkpoint whose stored scenario uses an option's old key or value spelling still resumes."""

import pytest

from raysfl.engine.checkpoint import CheckpointError, check_same_scenario, fingerprint, same_scenario
from raysfl.engine.runner import _finite
from raysfl.scenario import scenario_from_dict, scenario_to_dict


def resolved(name, params):
    doc = {
        "name": "renamed",
        "data": {"dataset": "synthetic", "partition": "iid"},
        "model": {"name": "lenet5"},
        "federation": {"num_clients": 3, "active_clients": 2},
        "algorithm": {"name": name, "params": params},
    }
    return _finite(scenario_to_dict(scenario_from_dict(doc)))


def as_written_before(doc, renames):
    """``doc`` with its params keys renamed back (new -> old) and values respelled, as older code wrote it."""
    old = {**doc, "algorithm": {**doc["algorithm"]}}
    old["algorithm"]["params"] = {renames.get(k, k): v for k, v in doc["algorithm"]["params"].items()}
    return old


@pytest.mark.parametrize(
    "name, params, renames, respell",
    [
        ("fedasync", {"staleness": "hinge", "staleness_b": 3}, {"staleness_a": "a", "staleness_b": "b"}, {}),
        ("fedbuff", {"buffer_size": 2}, {}, {"staleness": "none"}),
    ],
)
def test_a_scenario_stored_with_old_names_is_the_same_scenario(name, params, renames, respell):
    now = resolved(name, params)
    old = as_written_before(now, renames)
    old["algorithm"]["params"].update(respell)
    assert fingerprint(old) != fingerprint(now)  # the stored text differs ...
    assert same_scenario(old, now)  # ... but it is the same scenario read by today's schema
    check_same_scenario({"fingerprint": fingerprint(old), "scenario": old}, now, "ckpt")


def test_a_really_different_scenario_is_still_refused():
    now = resolved("fedasync", {})
    old = as_written_before(now, {"staleness_a": "a"})
    old["algorithm"]["params"]["a"] = 0.9
    assert not same_scenario(old, now)
    with pytest.raises(CheckpointError, match="algorithm.params"):
        check_same_scenario({"fingerprint": fingerprint(old), "scenario": old}, now, "ckpt")
    unreadable = {**now, "algorithm": {"name": "fedasync", "params": {"no_such_option": 1}}}
    assert not same_scenario(unreadable, now)
