"""The reproduction suite (scenarios/repro/<paper>/*.sweep.toml): every sweep validates and plans, and one
trial of each paper's sweeps runs end to end on the synthetic dataset with a tiny budget.

The suite itself takes hours of CPU (benchmarks/REPRODUCTION.md); these tests only keep its files runnable.
"""

from __future__ import annotations

import importlib.util
from functools import cache
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
    """The trial's scenario on synthetic data of the real dataset's shape, one short global iteration.

    Each client gets 40 samples, or the h minibatches a CSE-FSL client needs before its first upload.
    """
    info = DATASETS[scenario_dict["data"]["dataset"]]
    data = dict(scenario_dict["data"])
    h = scenario_dict["algorithm"].get("params", {}).get("h", 1)
    per_client = max(40, h * scenario_dict["train"]["batch_size"])
    data.update(
        dataset="synthetic",
        synthetic_channels=info.channels,
        synthetic_image_size=info.image_size,
        synthetic_classes=info.num_classes,
        synthetic_train=per_client * scenario_dict["federation"]["num_clients"],
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


@cache
def _table3() -> dict[tuple[str, str], tuple[float, ...]]:
    """FedASMU Table 3 per (model, dataset): (η_λ, η_σ, η_ι, η_γ, η_υ, η_i), from the scenario generator."""
    path = REPRO.parents[1] / "scripts" / "gen_fedasmu_scenarios.py"
    spec = importlib.util.spec_from_file_location("gen_fedasmu_scenarios", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {key: setting["eta"] for key, setting in module.SETTINGS.items()}


FEDASMU_TRIALS = [
    (path, trial)
    for path in SWEEPS
    for trial in load_sweep(path).trials
    if trial.scenario.algorithm.name in ("fedasmu", "fedssmu")
]


@pytest.mark.parametrize(
    ("path", "trial"), FEDASMU_TRIALS, ids=[f"{p.stem}:{t.name}" for p, t in FEDASMU_TRIALS]
)
def test_fedasmu_trials_keep_table3_learning_rates(path, trial):
    """A sweep that replaces ``algorithm.params`` must repeat its setting's Table 3 rates, not another's.

    The CIFAR-10 ablation once carried LeNet/FMNIST's 1e-4 for all five control rates (Table 3 gives
    LeNet/CIFAR-10 1e-3, 1e-3, 0.1, 0.1, 1e-3), which left FedASMU's learned controls nearly fixed.
    """
    sc = scenario_to_dict(trial.scenario)
    expected = _table3()[(sc["model"]["name"], sc["data"]["dataset"])]
    params = sc["algorithm"]["params"]
    names = ("eta_lambda", "eta_sigma", "eta_iota", "eta_gamma", "eta_upsilon")
    assert tuple(params[n] for n in names) == expected[:5], f"{path.name}: {trial.name}"
    assert sc["train"]["lr"] == expected[5], f"{path.name}: {trial.name}"
