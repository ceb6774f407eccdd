"""``train.eval_every_s``: every method evaluates on one emulated-time grid instead of every N iterations.

Each policy family (GAS, FL synchronous and asynchronous, MiniBatch-SFL, FedASMU and FedSSMU, the CSE-FSL
family, lightweight FedSL) runs the pinned-metrics tiny scenario twice: evaluated after every global
iteration, and on a grid of Δ emulated seconds. Evaluating does not change training, so the grid run must
report exactly the rows of the first run at the iterations the grid rule picks: the initial model, the first
iteration ending in each new cell ⌊t/Δ⌋, and the last.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from raysfl.algorithms.common.schedule import eval_due, eval_slot
from raysfl.algorithms.config import TrainConfig
from raysfl.engine import runner
from raysfl.scenario import scenario_from_dict
from tests.unit.algorithms.test_pinned_metrics import tiny

KEYS = ("iteration", "t", "accuracy", "loss")


def _evals(name: str, out, **train) -> list[dict]:
    raw = tiny(name)
    raw["train"] |= {"global_iterations": 8, **train}
    if name == "lightweight_fedsl":  # it evaluates at aggregations only: aggregate every round
        raw["algorithm"]["params"] = {"agg_interval": 1}
    runner.run(scenario_from_dict(raw), out, backend="local")
    return [{k: row[k] for k in KEYS} for row in pq.read_table(out / "metrics.parquet").to_pylist()]


def _grid_pick(rows: list[dict], every_s: float) -> list[dict]:
    """The rows the grid rule keeps, from a run evaluated after every iteration (rows in time order)."""
    kept, cell = [rows[0]], 0
    for row in rows[1:]:
        if int(row["t"] // every_s) > cell or row is rows[-1]:
            kept.append(row)
        cell = int(row["t"] // every_s)
    return kept


FAMILIES = [
    "gas",
    "fedavg",
    "fedasync",
    "minibatch_sfl",
    "fedasmu",
    "fedssmu",
    "cse_fsl",
    "lightweight_fedsl",
]


@pytest.mark.parametrize("name", FAMILIES)
def test_grid_run_reports_the_every_iteration_rows_the_grid_picks(name, tmp_path):
    every = _evals(name, tmp_path / "every", eval_every=1)
    assert [r["iteration"] for r in every] == list(range(len(every))), "one row per global iteration"
    span = every[-1]["t"]
    every_s = span / 3.5  # 4 cells over the run: some iterations share a cell, so the grid must skip some
    grid = _evals(name, tmp_path / "grid", eval_every=1, eval_every_s=every_s)
    expected = _grid_pick(every, every_s)
    assert 2 < len(expected) < len(every), "the chosen Δ must skip some iterations and keep some"
    assert grid == expected


def test_without_a_grid_every_nth_iteration_is_due():
    train = TrainConfig(eval_every=3)
    assert eval_slot(1e6, train) == 0
    assert [i for i in range(1, 10) if eval_due(i, 7.0 * i, train, 0)] == [3, 6, 9]


def test_grid_cells_are_due_once_and_skipped_cells_do_not_count_twice():
    train = TrainConfig(eval_every_s=10.0)
    times = [0.0, 4.0, 9.99, 10.0, 15.0, 42.0, 43.0, 50.0]
    due, cell = [], 0
    for i, t in enumerate(times[1:], start=1):
        due.append(eval_due(i, t, train, cell))
        cell = eval_slot(t, train)
    assert due == [False, False, True, False, True, False, True]


def test_negative_grid_is_refused_naming_the_field():
    with pytest.raises(Exception, match="eval_every_s"):
        scenario_from_dict({**tiny("fedavg"), "train": {"eval_every_s": -1.0}})
