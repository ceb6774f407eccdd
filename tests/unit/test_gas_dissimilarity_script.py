"""benchmarks/gas_dissimilarity.py on real (tiny, local) GAS runs; the engine logs the meter's columns."""

from __future__ import annotations

import importlib
import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from raysfl.engine import runner
from raysfl.scenario import scenario_from_dict
from tests.conftest import on_sys_path

ROOT = Path(__file__).resolve().parents[2]
METER = ("grad_dissimilarity", "grad_dissimilarity_real", "grad_reference_norm2")


@pytest.fixture(scope="module")
def script():
    with on_sys_path(ROOT / "benchmarks"):
        yield importlib.import_module("gas_dissimilarity")


def _doc(**params):
    return {
        "name": "tiny_gas",
        "seed": 5,
        "data": {
            "dataset": "synthetic",
            "synthetic_classes": 4,
            "partition": "shard",
            "shards_per_client": 2,
        },
        "model": {"name": "lenet5"},
        "federation": {"num_clients": 4, "active_clients": 2},
        "train": {"global_iterations": 4, "local_iterations": 2, "batch_size": 8, "eval_every": 2},
        "algorithm": {
            "name": "gas",
            "params": {"q_s": 2, "q_c": 2, "covariance": "diagonal", "dissimilarity_samples": 64, **params},
        },
        "metrics": {"progress": False},
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("dissimilarity")
    for name, params in {
        "plain": {},
        "gen": {"dissimilarity_every": 1},
        "nogen": {"dissimilarity_every": 1, "generate": False},
    }.items():
        runner.run(scenario_from_dict(_doc(**params)), root / name, backend="local")
    names = ("plain", "gen", "nogen")
    return root, {n: pq.read_table(root / n / "metrics.parquet").to_pylist() for n in names}


def test_engine_logs_the_meter_and_keeps_the_runs_numbers(runs):
    """metrics.parquet carries the three columns (null at iteration 0); accuracy and loss are unchanged."""
    _, metrics = runs
    plain, gen = metrics["plain"], metrics["gen"]
    assert [r["accuracy"] for r in gen] == [r["accuracy"] for r in plain]
    assert [r["loss"] for r in gen] == [r["loss"] for r in plain]
    assert all(key not in plain[0] for key in METER)
    assert all(gen[0][key] is None for key in METER)  # no server update before the first evaluation
    assert all(r[key] > 0 and math.isfinite(r[key]) for r in gen[1:] for key in METER)
    nogen = metrics["nogen"]
    assert all(r["grad_dissimilarity"] == r["grad_dissimilarity_real"] for r in nogen[1:])


def test_script_writes_the_tables_and_figure(runs, script, tmp_path, capsys):
    """The per-seed geometric means and the Lemma 1 ratio are those of the runs' metrics."""
    root, metrics = runs
    out = tmp_path / "out"
    argv = [str(root / "gen"), str(root / "nogen"), "--out", str(out)]
    argv += ["--label", f"gas={root / 'gen'}", "--label", f"async_sfl={root / 'nogen'}"]
    assert script.main(argv) == 0
    text = (out / "dissimilarity.md").read_text()
    assert (out / "dissimilarity.png").stat().st_size > 0
    gen = metrics["gen"][1:]
    batch = np.array([r["grad_dissimilarity"] for r in gen])
    real = np.array([r["grad_dissimilarity_real"] for r in gen])
    assert f"| 5 | {np.exp(np.mean(np.log(batch))):.4g} | {np.exp(np.mean(np.log(real))):.4g} |" in text
    ratio = float(np.mean(np.log10(real / batch)))
    assert f"mean log10(real / batch) per seed {ratio:+.3f}" in text
    assert "log10(async_sfl (update batch) / gas (update batch))" in text
    assert capsys.readouterr().out.startswith("# GAS gradient dissimilarity")


def test_script_refuses_runs_without_the_meter(runs, script, tmp_path):
    root, _ = runs
    with pytest.raises(SystemExit):
        script.main([str(root / "plain"), "--out", str(tmp_path / "x")])
