"""Every registered method's numbers on one tiny scenario, pinned exactly.

Refactors of the method API must not move a single digit: each method runs the same tiny synthetic
scenario on the local backend and its evaluation rows, event count and traffic are compared with the
values recorded in ``pinned_metrics.json``. After an *intended* change of numbers, rewrite the file with
``RAYSFL_REPIN=1 python -m pytest -q tests/unit/algorithms/test_pinned_metrics.py`` and say why in the commit.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raysfl.algorithms import ALGORITHMS
from raysfl.engine import runner
from raysfl.scenario import scenario_from_dict

PINS = Path(__file__).with_name("pinned_metrics.json")
AUX = {"cse_fsl", "fsl_an"}
PLAIN_SGD = {"fedasmu", "fedssmu", "lightweight_fedsl", "fedsl"}


def tiny(name: str) -> dict:
    """The fixed scenario: synthetic data, 5 clients (3 active), LeNet-5, 4 global iterations."""
    train = {"global_iterations": 4, "local_iterations": 2, "batch_size": 16, "eval_every": 1}
    if name in PLAIN_SGD:
        train |= {"optimizer": "sgd", "momentum": 0.0}
    return {
        "name": f"pin-{name}",
        "seed": 3,
        "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 300, "synthetic_test": 60},
        "model": {"name": "lenet5", **({"aux": "mlp"} if name in AUX else {})},
        "federation": {"num_clients": 5, "active_clients": 3},
        "train": train,
        "algorithm": {"name": name, **({"params": {"q_s": 3, "q_c": 3}} if name == "gas" else {})},
        "metrics": {"progress": False, "tensorboard": False},
    }


def measure(name: str, out: Path) -> dict:
    """The numbers pinned for one method: its evaluation rows (no wall time) and the run's totals."""
    summary = runner.run(scenario_from_dict(tiny(name)), out, backend="local")
    table = pq.read_table(out / "metrics.parquet")
    evals = [
        {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items() if k != "wall_s"}
        for row in table.to_pylist()
    ]
    totals = {k: summary[k] for k in ("events", "bytes_up", "bytes_down", "global_iterations", "stop_reason")}
    return {"evals": evals, "totals": totals}


def _pins() -> dict:
    return json.loads(PINS.read_text()) if PINS.exists() else {}


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_metrics_of_every_method_are_pinned(name, tmp_path):
    got = json.loads(json.dumps(measure(name, tmp_path / name)))  # the JSON round trip the pins went through
    if os.environ.get("RAYSFL_REPIN"):
        pins = _pins()
        pins[name] = got
        PINS.write_text(json.dumps(dict(sorted(pins.items())), indent=1) + "\n")
    pinned = _pins()
    assert name in pinned, f"{name} has no pinned numbers; run with RAYSFL_REPIN=1 once and commit them"
    assert got == pinned[name]
