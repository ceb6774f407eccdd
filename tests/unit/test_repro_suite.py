"""The reproduction suite (scenarios/repro/<paper>/*.sweep.toml): every sweep validates and plans, and one
trial of each paper's sweeps runs end to end on the synthetic dataset with a tiny budget.

The suite itself takes hours of CPU (benchmarks/REPRODUCTION.md); these tests only keep its files runnable.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raysfl.cli import main
from raysfl.data.registry import DATASETS
from raysfl.engine import runner
from raysfl.scenario import scenario_from_dict, scenario_to_dict
from raysfl.sweep.spec import load_sweep

REPRO = Path(__file__).resolve().parents[2] / "scenarios" / "repro"
SWEEPS = sorted(REPRO.rglob("*.sweep.toml"))
PAPERS = sorted({p.relative_to(REPRO).parts[0] for p in SWEEPS})


def test_the_suite_has_sweeps():
    assert SWEEPS, f"no sweep files under {REPRO}"


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: str(p.relative_to(REPRO)))
def test_every_repro_sweep_validates_and_plans(path, capsys, tmp_path):
    sweep = load_sweep(path)
    assert sweep.trials
    assert main(["sweep", str(path), "--dry-run", "--out", str(tmp_path / "out")]) == 0
    listed = capsys.readouterr().out
    for trial in sweep.trials:
        assert f"  {trial.name}:" in listed
    seeds = {t.scenario.seed for t in sweep.trials}
    assert len(seeds) >= 3, f"{path.name}: a reproduction sweep runs at least 3 seeds, has {sorted(seeds)}"


def tiny_synthetic(scenario_dict: dict) -> dict:
    """The trial's scenario on synthetic data of the real dataset's shape, one short global iteration."""
    info = DATASETS[scenario_dict["data"]["dataset"]]
    data = dict(scenario_dict["data"])
    data.update(
        dataset="synthetic",
        synthetic_channels=info.channels,
        synthetic_image_size=info.image_size,
        synthetic_classes=info.num_classes,
        synthetic_train=40 * scenario_dict["federation"]["num_clients"],
        synthetic_test=50,
    )
    train = dict(scenario_dict["train"], global_iterations=1, local_iterations=2, eval_every=1)
    out = dict(scenario_dict, data=data, train=train)
    out.pop("reference", None)
    return out


@pytest.mark.parametrize("paper", PAPERS)
def test_one_trial_of_each_paper_runs_on_synthetic_data(paper, tmp_path):
    sweep = load_sweep(sorted((REPRO / paper).glob("*.sweep.toml"))[0])
    trial = sweep.trials[0]
    sc = scenario_from_dict(tiny_synthetic(scenario_to_dict(trial.scenario)))
    summary = runner.run(sc, tmp_path / trial.name, backend="local")
    rows = pq.read_table(tmp_path / trial.name / "metrics.parquet").to_pylist()
    assert rows[-1]["iteration"] == 1
    assert 0.0 <= summary["final_accuracy"] <= 1.0
