"""Method parameters declared with ``option(applies=...)`` are truly unread when their condition fails.

``raysfl report`` treats such a parameter as unused (one group, no label part), so each declaration is a
claim about the method's code: changing the parameter while its condition fails changes no number. Each
is checked by running the method on the pinned tiny scenario (``test_pinned_metrics.tiny``) twice, once
with the parameters the condition leaves unread changed, and comparing every evaluation row (wall time
aside) and the run's totals. Every declared parameter is changed, while unread, in at least one pair.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from raysfl.algorithms import ALGORITHMS
from raysfl.config import (
    Above,
    Below,
    ConfigError,
    build,
    default_problems,
    diagnostic_options,
    option_meta,
    unused_options,
)
from raysfl.scenario import unread_options
from tests.unit.algorithms.test_pinned_metrics import measure_scenario, tiny
from tests.unit.test_config_applies import other_value

DECLARING = sorted(
    name
    for name, spec in ALGORITHMS.items()
    if any(option_meta(f).applies for f in dataclasses.fields(spec.params))
)


def _fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def _values(cls: type, controller: str) -> tuple[Any, ...]:
    """Values of a controlling option to try: its choices, both truth values, or the bound of a number
    condition (``Above(0)``: 0, where the options it guards are unread)."""
    f = _fields(cls)[controller]
    meta = option_meta(f)
    if meta.choices:
        return meta.choices
    if isinstance(f.default, bool):
        return (True, False)
    bounds = {
        type(f.default)(cond.limit)
        for g in dataclasses.fields(cls)
        for name, cond in (option_meta(g).applies or {}).items()
        if name == controller and isinstance(cond, (Above, Below))
    }
    assert bounds, f"{controller} controls an applies condition but has no finite set of values"
    return tuple(sorted(bounds))


def _states(cls: type) -> list[dict[str, Any]]:
    """Settings of the controlling options that leave parameters unread, each adding a parameter not
    unread in an earlier one (the defaults first)."""
    fields = _fields(cls)
    controllers = sorted({c for f in fields.values() for c in (option_meta(f).applies or {})})
    candidates = [{}] + [{c: v} for c in controllers for v in _values(cls, c) if v != fields[c].default]
    states, covered = [], set()
    for state in candidates:
        unread = set(unused_options(cls, state))
        if unread - covered:
            states.append(state)
            covered |= unread
    return states


def _changes(cls: type, state: dict[str, Any]) -> list[dict[str, Any]]:
    """The unread parameters of ``state`` set to other values, in as few valid sets as they allow (GAS
    refuses a low-rank sampler of diagonal covariances, both unread without generation)."""
    left, sets = unused_options(cls, state), []
    while left:
        current: dict[str, Any] = {}
        rest = []
        for name in left:
            trial = {**current, name: other_value(cls, name)}
            try:
                build(cls, {**state, **trial})
            except ConfigError:
                rest.append(name)
            else:
                current = trial
        assert current, f"no other value of {rest} builds with {state}"
        sets.append(current)
        left = rest
    return sets


def _numbers(name: str, params: dict[str, Any], out: Path) -> dict:
    """The pinned numbers of ``name`` on the tiny scenario with ``params`` (a NaN is read as None)."""
    scenario = tiny(name)
    scenario["algorithm"]["params"] = {**scenario["algorithm"].get("params", {}), **params}
    return measure_scenario(scenario, out)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_methods_conditions_are_well_formed(name):
    assert default_problems(ALGORITHMS[name].params) == []


def test_the_methods_that_declare_conditions():
    """The list the runs below cover (a declaration added elsewhere joins it)."""
    assert {"fedasync", "fedbuff", "fedsa", "gas", "fedasmu", "fedssmu", "fedprox"} <= set(DECLARING)
    assert {"lightweight_fedsl", "fedsl", "s2fl", "cse_fsl", "fsl_an", "splitfed_v1", "splitfed_v2"} <= set(
        DECLARING
    )


@pytest.mark.parametrize("name", DECLARING)
def test_an_unread_parameter_changes_no_number(name, tmp_path):
    cls = ALGORITHMS[name].params
    checked: set[str] = set()
    for i, state in enumerate(_states(cls)):
        base = _numbers(name, state, tmp_path / f"{i}-base")
        for j, change in enumerate(_changes(cls, state)):
            changed = _numbers(name, {**state, **change}, tmp_path / f"{i}-{j}")
            assert changed == base, f"{name} with {state}: changing {change} changed the run"
            checked |= set(change)
    declared = {n for n, f in _fields(cls).items() if option_meta(f).applies}
    assert checked == declared


def test_the_comparison_sees_a_read_parameter(tmp_path):
    """The check above can fail: FedAsync's polynomial s(τ) reads ``staleness_a``, and the run shows it."""
    base = _numbers("fedasync", {}, tmp_path / "a")
    assert _numbers("fedasync", {"staleness_a": 2.0}, tmp_path / "b") != base


def test_a_report_reads_unread_parameters_from_the_runs_algorithm():
    values = {"algorithm": {"name": "gas", "params": {"generate": False, "logit_adjustment": False}}}
    unread = unread_options(values)
    assert "algorithm.params.la_tau" in unread and "algorithm.params.ridge" in unread
    assert "algorithm.params.q_s" not in unread
    plugin = {"algorithm": {"name": "no_such_package.module:SPEC", "params": {"x": 1}}}
    assert unread_options(plugin) == []  # a plug-in not installed here: its parameters are all kept


@pytest.mark.parametrize(
    ("name", "setting", "unread"),
    [
        ("gas", {"optimizer": "adam"}, {"momentum": 0.5}),  # Adam has no momentum term here
        ("fedavg", {"eval_every_s": 5.0}, {"eval_every": 3}),  # the time grid replaces eval_every
    ],
)
def test_an_unread_train_option_changes_no_number(name, setting, unread, tmp_path):
    """The ``[train]`` options declared with ``applies``, each run both ways (and declared as such)."""
    from raysfl.algorithms.config import TrainConfig

    assert set(unread) <= set(unused_options(TrainConfig, setting))

    def numbers(values: dict, out: Path) -> dict:
        scenario = tiny(name)
        scenario["train"] |= values
        return measure_scenario(scenario, out)

    assert numbers({**setting, **unread}, tmp_path / "b") == numbers(setting, tmp_path / "a")


DIAGNOSTIC = {name: keys for name, spec in ALGORITHMS.items() if (keys := diagnostic_options(spec.params))}


def test_the_methods_that_declare_diagnostic_parameters():
    """The list the run below covers (a declaration added elsewhere joins it)."""
    assert DIAGNOSTIC["gas"] == ["dissimilarity_every", "dissimilarity_samples"]


@pytest.mark.parametrize("name", sorted(DIAGNOSTIC))
def test_a_diagnostic_parameter_changes_no_number(name, tmp_path):
    """``option(diagnostic=True)`` is a claim that ``raysfl report`` relies on to put runs with and without
    the meter in one group: with every diagnostic parameter changed, each evaluation column the plain run
    writes and the run's totals are the same; the changed run only adds columns."""
    cls = ALGORITHMS[name].params
    base = _numbers(name, {}, tmp_path / "base")
    change = {p: other_value(cls, p) for p in DIAGNOSTIC[name]}
    changed = _numbers(name, change, tmp_path / "changed")
    assert changed["totals"] == base["totals"]
    assert len(changed["evals"]) == len(base["evals"])
    added: set[str] = set()
    for row, plain in zip(changed["evals"], base["evals"], strict=True):
        assert {k: row[k] for k in plain} == plain, f"{name} with {change} changed the run"
        added |= {k for k, v in row.items() if k not in plain and v is not None}
    assert added, f"{name} with {change} measured nothing: the change did not switch its diagnostic on"
