"""FedAsync on the engine (no Ray): staleness functions and mixing by hand, versions, replacement."""

import math

import fl_helpers
import numpy as np
import pytest
import torch
from fl_helpers import DATA, KEY, wt
from torch import nn

from raysfl.algorithms.common.fl_client import FLClient
from raysfl.algorithms.common.fl_server import mix_models, staleness_weight
from raysfl.algorithms.config import TrainConfig
from raysfl.algorithms.fedasync import mixing_weight

BASE = {
    "name": "tiny-fedasync",
    "seed": 3,
    "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 600, "synthetic_test": 200},
    "model": {"name": "lenet5"},
    "federation": {"num_clients": 6, "active_clients": 3},
    "train": {"global_iterations": 14, "local_iterations": 2, "batch_size": 16, "eval_every": 7},
    "algorithm": {"name": "fedasync"},
    "metrics": {"progress": False, "tensorboard": False},
}


def tiny_server(name, params=None, sizes=(1, 1, 1), active=2, start=(1.0, 2.0)):
    return fl_helpers.tiny_server(name, params, sizes, active, start)


def run(tmp_path, overrides=(), base=BASE, name="run"):
    return fl_helpers.run_scenario(base, tmp_path, overrides, name)


# --- equations -------------------------------------------------------------------------------------
def test_staleness_functions_by_hand():
    assert [staleness_weight("constant", s) for s in (0, 1, 50)] == [1.0, 1.0, 1.0]
    # polynomial (t − τ + 1)^(−a), a = 0.5: 1, 1/2, 1/3
    assert [staleness_weight("polynomial", s, a=0.5) for s in (0, 3, 8)] == [1.0, 0.5, pytest.approx(1 / 3)]
    assert staleness_weight("polynomial", 1, a=2.0) == 0.25
    # hinge a = 10, b = 4: 1 up to 4 versions, then 1/(10·(t−τ−4) + 1)
    assert [staleness_weight("hinge", s, a=10, b=4) for s in (0, 4, 5, 6)] == [1.0, 1.0, 1 / 11, 1 / 21]
    assert mixing_weight(0.6, "polynomial", 3, 0.5, 4) == pytest.approx(0.3)
    with pytest.raises(ValueError, match="staleness"):
        staleness_weight("polynomial", -1)
    with pytest.raises(ValueError, match="unknown"):
        staleness_weight("exp", 1)


def test_mixing_by_hand():
    out = mix_models(wt(0.0, 4.0), wt(2.0, 0.0), 0.25)  # 0.75·[0, 4] + 0.25·[2, 0]
    assert torch.equal(out[KEY], wt(0.5, 3.0)[KEY])


def test_server_mixes_each_arrival_with_its_staleness():
    """α = 0.5, s = (t−τ+1)^(−1); w = [1, 2]; clients 0, 1 start at v0, client 2 at v1."""
    server = tiny_server("fedasync", {"alpha": 0.5, "staleness": "polynomial", "a": 1.0})
    server.send_model(0)
    server.send_model(1)
    server.on_client_model(0, wt(3.0, 2.0), 1)  # τ = 0 → α_t = 0.5: [2, 2]
    assert server.version == 1 and torch.equal(server.global_model()[KEY], wt(2.0, 2.0)[KEY])
    server.send_model(2)
    server.on_client_model(1, wt(1.0, 6.0), 1)  # t − τ = 1 → α_t = 0.25: 0.75·[2, 2] + 0.25·[1, 6]
    assert torch.equal(server.global_model()[KEY], wt(1.75, 3.0)[KEY])
    server.on_client_model(2, wt(0.0, 0.0), 1)  # sent at v1, now v2 → α_t = 0.25
    assert torch.equal(server.global_model()[KEY], wt(1.3125, 2.25)[KEY])
    ev = server.evaluate()
    assert ev["updates"] == 3 and ev["arrivals"] == 3 and ev["max_staleness"] == 1
    assert ev["mean_staleness"] == pytest.approx(2 / 3) and ev["mean_alpha"] == pytest.approx(1 / 3)
    with pytest.raises(RuntimeError, match="no open job"):
        server.on_client_model(2, wt(0.0, 0.0), 1)


def test_staleness_offset_counts_a_fresh_model_as_algorithm_1_does():
    """``staleness_offset = 1``: the same arrivals as above mix at α·s(t − τ + 1) = 0.5/2 and 0.5/3."""
    params = {"alpha": 0.5, "staleness": "polynomial", "a": 1.0, "staleness_offset": 1}
    server = tiny_server("fedasync", params)
    server.send_model(0)
    server.send_model(1)
    server.on_client_model(0, wt(3.0, 2.0), 1)  # fresh: s(1) = 1/2 → α_t = 0.25: 0.75·[1, 2] + 0.25·[3, 2]
    assert torch.equal(server.global_model()[KEY], wt(1.5, 2.0)[KEY])
    server.on_client_model(1, wt(1.5, 5.0), 1)  # one update since: s(2) = 1/3 → α_t = 1/6
    assert torch.allclose(server.global_model()[KEY], wt(1.5, 2.5)[KEY])
    ev = server.evaluate()
    assert ev["max_staleness"] == 1 and ev["mean_staleness"] == pytest.approx(0.5)  # the engine's count
    assert ev["mean_alpha"] == pytest.approx((0.25 + 1 / 6) / 2)


def test_proximal_term_by_hand():
    """ρ = 2, lr 0.1, x = 1, y = 0, W_0 = 0: step 1 W_1 = [0.05, −0.05]; step 2 adds ρ(W_1 − W_0)."""
    train = TrainConfig(local_iterations=2, batch_size=1, lr=0.1, momentum=0.0, weight_decay=0.0)
    p0 = 1 / (1 + math.exp(-0.1))  # softmax of logits [0.05, −0.05]
    for rho, expected in ((0.0, 0.05 + 0.1 * (1 - p0)), (2.0, 0.05 + 0.1 * (1 - p0 - 0.1))):
        lin = nn.Linear(1, 2, bias=False)
        client = FLClient(
            nn.Sequential(lin),
            np.array([[1.0]], dtype=np.float32),
            np.array([0]),
            lambda x, g: torch.from_numpy(x).float(),
            train,
            proximal=rho,
        )
        state = client.init_state(0, np.array([0]), np.random.SeedSequence(0))
        out = client.train(state, {"0.weight": torch.zeros(2, 1)})["0.weight"]
        assert out[0, 0].item() == pytest.approx(expected, abs=1e-7)
        assert out[1, 0].item() == pytest.approx(-expected, abs=1e-7)


# --- the run --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fedasync_run(tmp_path_factory):
    return run(tmp_path_factory.mktemp("fedasync"))


def test_every_arrival_is_one_version_and_staleness_is_logged(fedasync_run):
    summary, events, metrics = fedasync_run
    started_at: dict[int, int] = {}
    versions, stale = [], []
    for e in events:
        if e["kind"] == "start":
            started_at[e["client"]] = e["version"]
        else:
            assert e["server_update"] == 1
            assert e["staleness"] == e["version"] - started_at.pop(e["client"])
            versions.append(e["version"])
            stale.append(e["staleness"])
    assert versions == list(range(14))
    assert max(stale) >= 1  # heterogeneous devices: some models come back stale
    last = metrics[-1]
    assert [m["iteration"] for m in metrics] == [0, 7, 14]
    assert last["updates"] == 14 and last["max_staleness"] == max(stale)
    assert last["mean_staleness"] == pytest.approx(sum(stale) / len(stale))
    assert summary["stop_reason"] == "budget reached"


def test_c_jobs_run_and_a_finished_client_is_replaced_by_another(fedasync_run):
    _, events, _ = fedasync_run
    active: set[int] = set()
    just_finished: set[int] = set()
    t_now = None
    for e in events:
        if e["t"] != t_now:
            if t_now is not None and t_now > 0:
                assert len(active) == 3  # concurrency restored after each instant
            t_now, just_finished = e["t"], set()
        if e["kind"] == "model":
            active.remove(e["client"])
            just_finished.add(e["client"])
        else:
            assert e["client"] not in active and e["client"] not in just_finished
            active.add(e["client"])


def test_staleness_function_changes_the_result(tmp_path, fedasync_run):
    _, _, metrics = fedasync_run
    _, _, const = run(tmp_path, ['algorithm.params.staleness="constant"'], name="const")
    assert const[-1]["mean_alpha"] == pytest.approx(0.6)
    assert metrics[-1]["mean_alpha"] < 0.6
    assert [m["loss"] for m in const][1:] != [m["loss"] for m in metrics][1:]


def test_rho_reaches_the_clients_local_objective(tmp_path, fedasync_run):
    """ρ > 0 (the proximal term) changes a run of the same scenario: the option is not dropped on the way."""
    _, _, metrics = fedasync_run
    _, _, proximal = run(tmp_path, ["algorithm.params.rho=5.0"], name="rho")
    assert [m["loss"] for m in proximal][1:] != [m["loss"] for m in metrics][1:]
    assert [m["updates"] for m in proximal] == [m["updates"] for m in metrics]  # the same schedule


def test_fedasync_learns_fashion_mnist(tmp_path):
    if not (DATA / "fashion-mnist").is_dir():
        pytest.skip(f"real Fashion-MNIST not found at {DATA / 'fashion-mnist'}; quick accuracy check skipped")
    base = {
        "name": "fedasync-fmnist",
        "seed": 1,
        "data": {"dataset": "fashion-mnist", "data_dir": str(DATA), "partition": "iid"},
        "model": {"name": "lenet5"},
        "federation": {"num_clients": 10, "active_clients": 4},
        "train": {"global_iterations": 20, "local_iterations": 20, "lr": 0.05, "eval_every": 20},
        "algorithm": {"name": "fedasync"},
        "metrics": {"progress": False, "tensorboard": False, "events": False},
    }
    summary, _, metrics = run(tmp_path, base=base)
    assert [m["iteration"] for m in metrics] == [0, 20]
    assert metrics[0]["accuracy"] < 0.2 and summary["final_accuracy"] > 0.5, metrics
