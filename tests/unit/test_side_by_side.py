"""benchmarks/side_by_side.py: two checkouts run the same scenarios one after the other (issue 17).

The end-to-end test compares this checkout with itself on a tiny synthetic scenario (local backend): both
rows must exist with the same final accuracy; speed is not asserted.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from raysfl.config import dumps_toml
from tests.conftest import on_sys_path

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sbs():
    with on_sys_path(ROOT / "benchmarks"):
        yield importlib.import_module("side_by_side")


def test_a_scenario_carries_its_overrides(sbs):
    assert sbs.parse_scenario("scenarios/default.toml") == ("scenarios/default.toml", [])
    assert sbs.parse_scenario("a.toml::train.global_iterations=1,seed=3") == (
        "a.toml",
        ["train.global_iterations=1", "seed=3"],
    )


def test_table_divides_the_baseline_by_the_current_and_flags_other_work(sbs):
    rows = [
        {"scenario": "s", "system": "baseline", "commit": "a", "process_s": 30.0, "run_s": 20.0, "acc": 0.5},
        {"scenario": "s", "system": "current", "commit": "b", "process_s": 20.0, "run_s": 10.0, "acc": 0.5},
        {"scenario": "u", "system": "baseline", "commit": "a", "process_s": 9.0, "run_s": 8.0, "acc": 0.5},
        {"scenario": "u", "system": "current", "commit": "b", "process_s": 9.0, "run_s": 8.0, "acc": 0.6},
    ]
    lines = sbs.table(rows).splitlines()
    assert lines[3] == "| `s` | current | b | 20.0 | 10.0 | 0.5000 | 1.50× [2.00×] |"
    assert lines[2].endswith("| 0.5000 |  |")  # the baseline has no speed-up of its own
    assert "0.6000 (differs!)" in lines[5]
    variant = {"scenario": "s", "system": "low-rank", "commit": "b", "process_s": 15.0, "run_s": 8.0}
    variant["acc"] = 0.4
    assert sbs.table([*rows[:2], variant]).splitlines()[4] == (
        "| `s` | low-rank | b | 15.0 | 8.0 | 0.4000 (option) | 2.00× [2.50×] |"
    )


def test_both_systems_run_the_same_scenario(sbs, tmp_path, capsys):
    scenario = {
        "name": "tiny-side-by-side",
        "seed": 5,
        "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 240, "synthetic_test": 40},
        "model": {"name": "lenet5"},
        "federation": {"num_clients": 4, "active_clients": 2},
        "train": {"global_iterations": 1, "local_iterations": 2, "batch_size": 16},
        "algorithm": {"name": "fedavg"},
        "metrics": {"progress": False, "tensorboard": False},
    }
    path = tmp_path / "tiny.toml"
    path.write_text(dumps_toml(scenario))
    out = tmp_path / "rows.json"
    args = ["--baseline", str(ROOT), "--scenario", f"{path}::seed=6", "--extra=--backend", "--extra=local"]
    variant = "--variant=other-seed::seed=7"  # applied after the scenario's own overrides
    assert sbs.main([*args, variant, "--json", str(out)]) == 0
    printed = capsys.readouterr()
    table = printed.out
    assert "| baseline |" in table and "| current |" in table and "differs" not in table
    rows = json.loads(out.read_text())
    assert [r["system"] for r in rows] == ["baseline", "current", "other-seed"]
    assert rows[0]["acc"] == rows[1]["acc"] and all(r["process_s"] >= r["run_s"] > 0 for r in rows)
    assert all(r["runs"] == [[r["process_s"], r["run_s"]]] for r in rows)  # one repeat: the median is it
    assert printed.err.count("side_by_side:   process ") == 3  # each run's own times, as it ends
