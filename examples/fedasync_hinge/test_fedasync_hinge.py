"""The example method: its equations, and the engine's guarantees for a method that lives outside raysfl.

Runs on synthetic data (the scenario file's data section overridden), so it needs no dataset.
"""

import math
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch

from examples.fedasync_hinge.method import SPEC, HingeServer, hinge
from raysfl.api import check_spec
from raysfl.cli import main
from raysfl.engine import runner
from raysfl.scenario import load_scenario

HERE = Path(__file__).parent
SCENARIO = HERE / "scenario.toml"
TINY = [
    "data.dataset=synthetic",
    "data.partition=iid",
    "data.synthetic_train=300",
    "data.synthetic_test=60",
    "federation.num_clients=5",
    "federation.active_clients=3",
    "train.global_iterations=6",
    "train.local_iterations=2",
    "train.batch_size=16",
    "train.eval_every=2",
    "metrics.progress=false",
]


def rows(path: Path) -> list[dict]:
    table = pq.read_table(path)
    table = table.drop([c for c in ("wall_s",) if c in table.column_names])
    return [
        {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()}
        for r in table.to_pylist()
    ]


def outputs(run_dir: Path) -> tuple[list[dict], list[dict]]:
    return rows(run_dir / "metrics.parquet"), rows(run_dir / "events.parquet")


def test_the_hinge_is_one_up_to_b_then_falls_as_one_over_a_tau_minus_b_plus_one():
    assert [hinge(t, a=0.5, b=2) for t in (0, 1, 2, 3, 4, 6)] == [1.0, 1.0, 1.0, 1 / 1.5, 1 / 2.0, 1 / 3.0]


def test_the_server_mixes_an_arrival_with_alpha_times_the_hinge_of_its_staleness():
    sc = load_scenario(SCENARIO, [*TINY, "algorithm.params.alpha=0.5", "algorithm.params.b=0"])
    server = object.__new__(HingeServer)  # only the update rule: no model, no test set
    server.p, server.version, server.alpha_sum = sc.params, 0, 0.0
    server.weights, server.bases = {"w": torch.tensor([0.0, 4.0])}, {}
    server.send_model(1)  # client 1 starts at version 0
    server.send_model(2)
    server.receive(2, {"w": torch.tensor([2.0, 0.0])})  # staleness 0: α = 0.5
    assert server.weights["w"].tolist() == [1.0, 2.0]
    server.receive(1, {"w": torch.tensor([5.0, 2.0])})  # staleness 1 past b = 0: α = 0.5 / (0.5 + 1) = 1/3
    assert server.weights["w"].tolist() == pytest.approx([7 / 3, 2.0])


def test_the_spec_satisfies_the_protocols():
    assert check_spec(SPEC) == []


def test_the_scenario_file_loads_and_validates_its_params(capsys):
    sc = load_scenario(SCENARIO)
    assert sc.algorithm_spec is SPEC and sc.params.b == 2
    assert main(["run", str(SCENARIO), "algorithm.params.alpha=2", "algorithm.params.c=1"]) == 2
    err = capsys.readouterr().err
    assert "algorithm.params.alpha" in err and "algorithm.params.c" in err and "Traceback" not in err


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hinge") / "local"
    sc = load_scenario(SCENARIO, [*TINY, "engine.checkpoint_every=2", "engine.keep_checkpoints=10"])
    summary = runner.run(sc, out, backend="local")
    assert summary["global_iterations"] == 6 and summary["stop_reason"] == "budget reached"
    return out


def test_it_runs_and_logs_every_arrival_with_its_staleness(local_run):
    metrics, events = outputs(local_run)
    assert [r["iteration"] for r in metrics] == [0, 2, 4, 6]
    assert all(0 <= r["accuracy"] <= 1 and "mean_alpha" in r for r in metrics)
    arrivals = [e for e in events if e["kind"] == "arrival"]
    assert len(arrivals) == 6 and all(e["staleness"] >= 0 for e in arrivals)


def test_it_resumes_from_a_checkpoint_to_the_same_numbers(local_run, tmp_path):
    crashed = tmp_path / "crashed"
    shutil.copytree(local_run, crashed)
    for ck in (crashed / "checkpoints").glob("ckpt-*.pt"):
        if ck.name > "ckpt-000002.pt":
            ck.unlink()
    (crashed / "summary.json").unlink()
    sc = load_scenario(SCENARIO, [*TINY, "engine.checkpoint_every=2", "engine.keep_checkpoints=10"])
    resumed = runner.run(sc, crashed, backend="local", resume=True)
    assert resumed["resumed_from"] == "ckpt-000002.pt"
    assert outputs(crashed) == outputs(local_run)


@pytest.mark.parametrize("pools", [1, 3])
def test_ray_pools_match_the_local_run(ray_session, local_run, tmp_path, pools):
    """The pools and the server actor import the method by its path, and checkpoint its state there."""
    sc = load_scenario(SCENARIO, [*TINY, f"engine.pools={pools}", "engine.checkpoint_every=2"])
    runner.run(sc, tmp_path / "ray", backend="ray")
    assert outputs(tmp_path / "ray") == outputs(local_run)
    assert len(list((tmp_path / "ray" / "checkpoints").glob("ckpt-*.pt"))) >= 1
