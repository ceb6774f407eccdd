"""Shared pieces of the algorithm tests: a 2-parameter model server, a tiny engine run, a resume check."""

import copy
import shutil

import numpy as np
import pyarrow.parquet as pq
import torch
from torch import nn

from raysfl.algorithms import ALGORITHMS
from raysfl.algorithms.base import RunSetup
from raysfl.engine import runner
from raysfl.models.split import SplitModel
from raysfl.scenario import scenario_from_dict
from tests.conftest import data_root

DATA = data_root()
KEY = "client.weight"


def wt(a: float, b: float) -> dict[str, torch.Tensor]:
    return {KEY: torch.tensor([[a], [b]])}


def tiny_server(name, params=None, sizes=(1, 1, 1), active=2, start=(1.0, 2.0)):
    """A method's server on a 2-parameter model (Linear(1, 2) without bias) and |D_k| = ``sizes``."""
    sc = scenario_from_dict(
        {
            "name": "tiny",
            "data": {"dataset": "synthetic", "partition": "iid"},
            "model": {"name": "lenet5"},
            "federation": {"num_clients": len(sizes), "active_clients": active},
            "algorithm": {"name": name, "params": params or {}},
        }
    )
    setup = RunSetup(
        sc, sc.params, (1, 1, 1), 2, tuple(np.arange(n) for n in sizes), np.ones((len(sizes), 2))
    )
    lin = nn.Linear(1, 2, bias=False)
    with torch.no_grad():
        lin.weight.copy_(wt(*start)[KEY])
    model = SplitModel(lin, nn.Identity(), None, "tiny", "s", (2,), (1,))
    test_x, test_y = torch.tensor([[1.0], [-1.0]]), torch.tensor([0, 1])
    return ALGORITHMS[name].make_server(setup, model, test_x, test_y, 0, "cpu")


def run_scenario(base, tmp_path, overrides=(), name="run"):
    sc = scenario_from_dict(base, list(overrides))
    summary = runner.run(sc, tmp_path / name, backend="local")
    path = tmp_path / name / "events.parquet"
    events = pq.read_table(path).to_pylist() if path.exists() else []
    metrics = pq.read_table(tmp_path / name / "metrics.parquet").to_pylist()
    return summary, events, metrics


def server_charge_at_first_barrier(base, tmp_path, server_flops_per_s):
    """How far the first round's second arrivals move when the server rate goes from free to the given one.

    A synchronous split run (MiniBatch-SFL, S2FL) with ``local_iterations >= 2``: the shift of each client's
    ``act`` event of iteration 2 in round 0 is the server time charged at the first barrier. Returns
    client id → shift in seconds.
    """

    def arrivals(rate, name):
        timed = copy.deepcopy(base)
        timed.setdefault("system", {})["server_flops_per_s"] = rate
        _, events, _ = run_scenario(timed, tmp_path, name=name)
        second = [e for e in events if e["kind"] == "act" and e["e"] == 2 and e["version"] == 0]
        return {e["client"]: e["t"] for e in second}

    free, charged = arrivals(0.0, "server_free"), arrivals(server_flops_per_s, "server_charged")
    assert free.keys() == charged.keys()
    return {k: charged[k] - free[k] for k in free}


def resumes_identically(doc, tmp_path):
    """Run ``doc`` with checkpoints every 2 iterations; crash after the first; resume; compare the outputs."""
    doc = {**doc, "engine": {"checkpoint_every": 2, "keep_checkpoints": 10}}
    sc = scenario_from_dict(doc)
    full = runner.run(sc, tmp_path / "full", backend="local")
    crashed = tmp_path / "crashed"
    shutil.copytree(tmp_path / "full", crashed)
    for ck in sorted((crashed / "checkpoints").glob("ckpt-*.pt"))[1:]:
        ck.unlink()
    (crashed / "summary.json").unlink()
    resumed = runner.run(sc, crashed, backend="local", resume=True)
    assert resumed["resumed_from"] == "ckpt-000002.pt"
    for table in ("metrics.parquet", "events.parquet"):
        again, ref = pq.read_table(crashed / table), pq.read_table(tmp_path / "full" / table)
        drop = [c for c in ("wall_s",) if c in ref.column_names]
        assert again.drop(drop) == ref.drop(drop)
    assert resumed["final_accuracy"] == full["final_accuracy"] and resumed["events"] == full["events"]


class StubTime:
    """Download 1 s, 0.5 s per minibatch step, upload 1 s for every client."""

    def download_s(self, k, nbytes):
        return 1.0

    def compute_s(self, k, flops, batch):
        return 0.5

    def upload_s(self, k, nbytes):
        return 1.0


class StubProfile:
    """A full model of 1 FLOP per pass and 8 bytes."""

    full_forward_flops = full_backward_flops = 1.0
    client_model_bytes = 8
    client_buffer_bytes = server_model_bytes = server_buffer_bytes = 0


def fl_policy(name, params, *, num_clients, active, local_iterations, seed, train=None):
    """A method's FL policy on :class:`StubTime` (batch size 1, 4 samples per client), without data or Ray.

    ``train``: more ``[train]`` options.
    """
    sc = scenario_from_dict(
        {
            "name": f"{name}-policy",
            "data": {"dataset": "synthetic", "partition": "iid"},
            "model": {"name": "lenet5"},
            "federation": {"num_clients": num_clients, "active_clients": active},
            "train": {"local_iterations": local_iterations, "batch_size": 1, **(train or {})},
            "algorithm": {"name": name, "params": params},
        }
    )
    setup = RunSetup(sc, sc.params, (1, 1, 1), 2, tuple(np.arange(4) for _ in range(num_clients)), None)
    return ALGORITHMS[name].make_policy(setup, StubTime(), StubProfile(), np.random.default_rng(seed))
