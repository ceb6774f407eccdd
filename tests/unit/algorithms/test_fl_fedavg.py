"""FedAvg on the engine (no Ray): the round average by hand, the full-model client, round timing."""

import fl_helpers
import numpy as np
import pytest
import torch
from fl_helpers import DATA, KEY, wt
from torch import nn

from raysfl.algorithms.common.batching import batch_size_at
from raysfl.algorithms.common.fl_client import FLClient
from raysfl.algorithms.common.fl_server import Arrival, add_scaled
from raysfl.algorithms.config import TrainConfig
from raysfl.algorithms.fedavg import aggregate_round
from raysfl.engine import runner
from raysfl.scenario import scenario_from_dict

BASE = {
    "name": "tiny-fedavg",
    "seed": 7,
    "data": {"dataset": "synthetic", "partition": "shard", "synthetic_train": 600, "synthetic_test": 200},
    "model": {"name": "lenet5"},
    "federation": {"num_clients": 10, "active_clients": 3},
    "train": {"global_iterations": 4, "local_iterations": 3, "batch_size": 16},
    "algorithm": {"name": "fedavg"},
    "system": {
        "compute": {"kind": "fixed", "flops_per_s": 1e9},
        "link": {"kind": "fixed", "uplink_bps": 1e7, "downlink_bps": 2e7},
    },
    "metrics": {"progress": False, "tensorboard": False},
}


def tiny_server(name, params=None, sizes=(1, 3), active=2, start=(1.0, 2.0)):
    return fl_helpers.tiny_server(name, params, sizes, active, start)


def run(tmp_path, overrides=(), base=BASE, name="run"):
    return fl_helpers.run_scenario(base, tmp_path, overrides, name)


# --- aggregation -------------------------------------------------------------------------------------
def test_round_average_by_hand():
    """w = [1, 2]; w_0 = [3, 2] with |D_0| = 1, w_1 = [1, 6] with |D_1| = 3."""
    g = wt(1.0, 2.0)
    arrivals = [Arrival(0, wt(3.0, 2.0), g, 1, 0), Arrival(1, wt(1.0, 6.0), g, 3, 0)]
    # data-size: 1/4·[3, 2] + 3/4·[1, 6] = [1.5, 5.0]; uniform: [2, 4]
    assert torch.equal(aggregate_round(g, arrivals, "data-size")[KEY], wt(1.5, 5.0)[KEY])
    assert torch.equal(aggregate_round(g, arrivals, "uniform")[KEY], wt(2.0, 4.0)[KEY])


def test_add_scaled_rounds_integer_buffers_and_keeps_dtypes():
    base = {"w": torch.tensor([1.0], dtype=torch.float32), "n": torch.tensor(3)}
    out = add_scaled(base, [(0.5, {"w": torch.tensor([1.0]), "n": torch.tensor(3.0)})])
    assert out["w"].dtype == torch.float32 and out["w"].item() == 1.5
    assert out["n"].dtype == torch.int64 and out["n"].item() == 4  # 3 + 1.5 = 4.5 rounds half to even


def test_server_aggregates_after_c_models_and_counts():
    server = tiny_server("fedavg")
    for k in (0, 1):
        assert torch.equal(server.send_model(k)[KEY], wt(1.0, 2.0)[KEY])
    server.on_client_model(1, wt(1.0, 6.0), 3)
    assert server.version == 0  # the round is not complete
    server.on_client_model(0, wt(3.0, 2.0), 1)
    assert server.version == 1 and torch.equal(server.global_model()[KEY], wt(1.5, 5.0)[KEY])
    ev = server.evaluate()
    assert ev["updates"] == 1 and ev["arrivals"] == 2 and ev["max_staleness"] == 0
    # test set: x = 1 → logits w = [1.5, 5] (predicts 1, label 0); x = -1 → [-1.5, -5] (predicts 0, label 1)
    assert ev["accuracy"] == 0.0


# --- the full-model client -----------------------------------------------------------------------------
def _client(train, train_x, train_y, init=0.0):
    lin = nn.Linear(1, 2, bias=False)
    with torch.no_grad():
        lin.weight.fill_(init)
    return FLClient(nn.Sequential(lin), train_x, train_y, lambda x, g: torch.from_numpy(x).float(), train)


def test_one_sgd_step_by_hand():
    """Logits 0 → p = (½, ½); ∂CE/∂W = (p − e_0)·x = [−½, ½]; W ← −0.1·∂ = [0.05, −0.05]."""
    train = TrainConfig(local_iterations=1, batch_size=1, lr=0.1, momentum=0.0, weight_decay=0.0)
    client = _client(train, np.array([[1.0]], dtype=np.float32), np.array([0]))
    state = client.init_state(0, np.array([0]), np.random.SeedSequence(1))
    w0 = {"0.weight": torch.zeros(2, 1)}
    out = client.train(state, w0)
    assert torch.allclose(out["0.weight"], torch.tensor([[0.05], [-0.05]]))
    assert torch.equal(w0["0.weight"], torch.zeros(2, 1))  # the received model is not modified


def test_jobs_continue_the_cursor_with_a_fresh_optimizer():
    """Job 2 equals E manual SGD steps (fresh momentum) on the batches after job 1's."""
    train = TrainConfig(
        local_iterations=2, batch_size=2, lr=0.1, momentum=0.9, weight_decay=1e-3, clip_grad_norm=0.5
    )
    xs = np.linspace(-1, 1, 5, dtype=np.float32).reshape(5, 1)
    ys = np.array([0, 1, 0, 1, 1])
    client = _client(train, xs, ys)
    seq = np.random.SeedSequence(5)
    state = client.init_state(3, np.arange(5), seq)
    w0 = {"0.weight": torch.tensor([[0.3], [-0.2]])}
    client.train(state, w0)
    job2 = client.train(state, w0)
    assert state.cursor.step == 4 and state.jobs == 2

    ref = client.init_state(3, np.arange(5), seq)
    batches = [client.next_batch(ref) for _ in range(4)][2:]
    w = w0["0.weight"].clone().requires_grad_(True)
    opt = torch.optim.SGD([w], lr=0.1, momentum=0.9, weight_decay=1e-3)
    for x, y in batches:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(x @ w.T, y).backward()
        torch.nn.utils.clip_grad_norm_([w], 0.5)
        opt.step()
    assert [len(y) for _, y in batches] == [1, 2]  # job 2 starts with the epoch's remainder batch
    assert torch.allclose(job2["0.weight"], w.detach(), atol=1e-7)


# --- the run --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fedavg_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fedavg")
    prep = runner.prepare(scenario_from_dict(BASE))
    return (*run(tmp), prep)


def test_rounds_are_synchronous_with_c_distinct_clients(fedavg_run):
    summary, events, metrics, _ = fedavg_run
    starts = [e for e in events if e["kind"] == "start"]
    models = [e for e in events if e["kind"] == "model"]
    assert len(starts) == len(models) == 4 * 3
    for r in range(4):
        rs = [e for e in starts if e["version"] == r]
        rm = [e for e in models if e["version"] == r]
        assert len({e["client"] for e in rs}) == 3 and {e["client"] for e in rs} == {e["client"] for e in rm}
        assert len({e["t"] for e in rs}) == 1  # the round starts together
        assert all(e["staleness"] == 0 for e in rm)
        assert [e["server_update"] for e in rm] == [None, None, 1]  # one aggregation, at the last arrival
        if r < 3:  # the next round starts when the slowest job of this one has arrived
            assert [e for e in starts if e["version"] == r + 1][0]["t"] == max(e["t"] for e in rm)
    assert [m["iteration"] for m in metrics] == [0, 1, 2, 3, 4]
    assert [m["updates"] for m in metrics] == [0, 1, 2, 3, 4]
    assert summary["stop_reason"] == "budget reached" and summary["emulated_s"] == models[-1]["t"]


def test_job_duration_is_download_e_minibatches_upload(fedavg_run):
    """T_k = 8|w|/R_dn + Σ_e b_e·(F_fwd + F_bwd)/f + 8|w|/R_up, b_e from the client's cursor."""
    _, events, _, prep = fedavg_run
    prof = prep.profile
    nbytes = (
        prof.client_model_bytes
        + prof.client_buffer_bytes
        + prof.server_model_bytes
        + prof.server_buffer_bytes
    )
    flops = prof.full_forward_flops + prof.full_backward_flops
    steps: dict[int, int] = {}
    opened: dict[int, float] = {}
    for e in events:
        k = e["client"]
        if e["kind"] == "start":
            assert e["bytes_down"] == nbytes
            opened[k] = e["t"]
            continue
        assert e["bytes_up"] == nbytes
        first = steps.get(k, 0)
        sizes = [batch_size_at(s, 60, 16) for s in range(first, first + 3)]
        steps[k] = first + 3
        expected = 8 * nbytes / 2e7 + sum(sizes) * flops / 1e9 + 8 * nbytes / 1e7
        assert e["t"] - opened.pop(k) == pytest.approx(expected, rel=1e-12)
    assert any(v > 4 for v in steps.values())  # some client's second job crossed an epoch end (b = 12)


def test_same_seed_same_metrics_and_uniform_equals_data_size_on_equal_shards(tmp_path, fedavg_run):
    _, _, metrics, _ = fedavg_run
    _, _, again = run(tmp_path, name="again")
    assert [(m["accuracy"], m["loss"], m["t"]) for m in again] == [
        (m["accuracy"], m["loss"], m["t"]) for m in metrics
    ]
    _, _, uniform = run(tmp_path, ['algorithm.params.aggregation="uniform"'], name="uniform")
    # equal |D_k| (60 each): uniform and data-size weights coincide exactly
    assert [m["loss"] for m in uniform] == [m["loss"] for m in metrics]


def test_fedavg_learns_fashion_mnist(tmp_path):
    if not (DATA / "fashion-mnist").is_dir():
        pytest.skip(f"real Fashion-MNIST not found at {DATA / 'fashion-mnist'}; quick accuracy check skipped")
    base = {
        "name": "fedavg-fmnist",
        "seed": 1,
        "data": {"dataset": "fashion-mnist", "data_dir": str(DATA), "partition": "iid"},
        "model": {"name": "lenet5"},
        "federation": {"num_clients": 10, "active_clients": 4},
        "train": {"global_iterations": 5, "local_iterations": 20, "lr": 0.05, "eval_every": 5},
        "algorithm": {"name": "fedavg"},
        "metrics": {"progress": False, "tensorboard": False, "events": False},
    }
    summary, _, metrics = run(tmp_path, base=base)
    assert [m["iteration"] for m in metrics] == [0, 5]
    assert metrics[0]["accuracy"] < 0.2 and summary["final_accuracy"] > 0.5, metrics


# --- the start: the first models go out before the initial evaluation -----------------------------------
def test_the_server_sends_the_first_models_before_it_evaluates():
    """FL policies' start: C ``send_model`` calls, then ``evaluate`` and its report, then the jobs; the report
    precedes every start log (it carries the counters of time 0)."""
    from raysfl.algorithms.actions import SERVER, Call, Log, Report

    policy = fl_helpers.fl_policy("fedavg", {}, num_clients=6, active=3, local_iterations=2, seed=1)
    actions = policy.start()
    server = [a.method for a in actions if isinstance(a, Call) and a.target == SERVER]
    assert server == ["send_model"] * 3 + ["evaluate"]
    kinds = [type(a).__name__ for a in actions]
    assert kinds.index("Report") < min(i for i, a in enumerate(actions) if isinstance(a, Log))
    assert isinstance(actions[kinds.index("Report")], Report)
    trains = [a for a in actions if isinstance(a, Call) and a.target != SERVER]
    assert [a.client for a in trains] == sorted(a.client for a in trains) and len(trains) == 3


@pytest.mark.parametrize("name", ["fedavg", "fedasync", "fedbuff"])
def test_sending_before_the_initial_evaluation_changes_no_output(tmp_path, monkeypatch, name):
    """The same metrics and events as the order "evaluate, then send" (what the policy did before)."""
    from raysfl.algorithms.common import fl_policy
    from raysfl.algorithms.common.schedule import evaluate

    _, events, metrics = run(tmp_path, [f'algorithm.name="{name}"'], name="sends-first")

    def evaluate_first(self):
        actions = evaluate(self.version, 0.0)
        for k in self._draw(self.concurrency):
            actions += self._start_job(k, 0.0, initial=True)
        return actions

    monkeypatch.setattr(fl_policy.FLPolicy, "start", evaluate_first)
    _, events_then, metrics_then = run(tmp_path, [f'algorithm.name="{name}"'], name="evaluate-first")
    drop = ("wall_s",)
    assert [{k: v for k, v in m.items() if k not in drop} for m in metrics] == [
        {k: v for k, v in m.items() if k not in drop} for m in metrics_then
    ]
    assert events == events_then
