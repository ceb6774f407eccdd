"""CSE-FSL and SplitFed V1 (FSL_MC) on real CIFAR-10 (JPEG copy in shared/data): accuracy rises above chance.

The shipped `_quick` scenarios with a smaller budget so each run takes well under a minute on 2 CPU cores:
50 clients of 1,000 images with 5 drawn per round (instead of 5 of 10,000), 2 rounds, single-threaded torch,
and every 10th test image (1,000, all classes). CSE-FSL runs with h = 1 here: with h = 5 its server model
gets only 20 steps per round of 5,000 images, too few to leave chance level in two rounds.
"""

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from raysfl.engine import runner
from raysfl.scenario import load_scenario
from tests.conftest import data_root

ROOT = Path(__file__).resolve().parents[3]
SHARED_DATA = data_root()
QUICK = [
    "federation.num_clients=50",
    "federation.active_clients=5",
    "train.global_iterations=2",
    "train.eval_every=2",
    "engine.torch_threads=1",
    "engine.server_threads=1",
    "data.download=false",
    "metrics.tensorboard=false",
    "metrics.progress=false",
]


@pytest.fixture
def cifar(monkeypatch):
    if not (SHARED_DATA / "cifar10-jpg.tar.gz").exists():
        pytest.skip(f"real CIFAR-10 not available: {SHARED_DATA / 'cifar10-jpg.tar.gz'} is absent")
    orig = runner.load_dataset

    def every_tenth_test_image(cfg, data_dir=None):
        ds = orig(cfg, data_dir)
        return dataclasses.replace(
            ds, test_x=np.ascontiguousarray(ds.test_x[::10]), test_y=np.ascontiguousarray(ds.test_y[::10])
        )

    monkeypatch.setattr(runner, "load_dataset", every_tenth_test_image)
    return str(SHARED_DATA)


@pytest.mark.slow
@pytest.mark.parametrize(
    "scenario, extra",
    [("cifar10_iid_cse_fsl_h5_quick", ["algorithm.params.h=1"]), ("cifar10_iid_splitfed_v1_quick", [])],
)
def test_quick_run_on_cifar10_rises_above_chance(cifar, tmp_path, scenario, extra):
    sc = load_scenario(ROOT / "scenarios" / "cse_fsl" / "table5" / f"{scenario}.toml", [*QUICK, *extra])
    summary = runner.run(sc, tmp_path / "run", backend="local", data_dir=cifar)
    metrics = pq.read_table(tmp_path / "run" / "metrics.parquet").to_pylist()
    assert summary["dataset"] == "cifar10" and not summary["synthetic_data"]
    assert [m["iteration"] for m in metrics] == [0, 2]
    assert metrics[-1]["accuracy"] > 0.20, metrics[-1]
    assert metrics[-1]["accuracy"] > metrics[0]["accuracy"]
