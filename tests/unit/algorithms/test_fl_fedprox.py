"""FedProx (no Ray): the proximal local steps by hand, FedAvg's round average, the spec wiring, stragglers."""

import math

import fl_helpers
import numpy as np
import pytest
import torch
from fl_helpers import KEY, wt
from torch import nn

from raysfl.algorithms import ALGORITHMS
from raysfl.algorithms.actions import Call, Event, Log
from raysfl.algorithms.common.fl_client import FLClient
from raysfl.algorithms.config import TrainConfig


def one_sample_client(mu: float, steps: int = 2) -> tuple[FLClient, object]:
    """Linear(1, 2) without bias on the single sample x = 1, y = 0; SGD lr 0.1 without momentum."""
    train = TrainConfig(local_iterations=steps, batch_size=1, lr=0.1, momentum=0.0, weight_decay=0.0)
    client = FLClient(
        nn.Sequential(nn.Linear(1, 2, bias=False)),
        np.array([[1.0]], dtype=np.float32),
        np.array([0]),
        lambda x, g: torch.from_numpy(x).float(),
        train,
        proximal=mu,
    )
    return client, client.init_state(0, np.array([0]), np.random.SeedSequence(0))


def test_proximal_local_steps_by_hand():
    """h_k(w; w^t) = F_k(w) + μ/2·‖w − w^t‖², w^t = 0. Step 1: ∇ = [−½, ½] → w_1 = [0.05, −0.05].
    Step 2: ∇F = [p_0 − 1, 1 − p_0] with p_0 = σ(0.1), plus μ·(w_1 − w^t)."""
    p0 = 1 / (1 + math.exp(-0.1))
    for mu in (0.0, 2.0, 5.0):
        client, state = one_sample_client(mu)
        out = client.train(state, {"0.weight": torch.zeros(2, 1)})["0.weight"]
        expected = 0.05 + 0.1 * (1 - p0 - mu * 0.05)
        assert out[0, 0].item() == pytest.approx(expected, abs=1e-7)
        assert out[1, 0].item() == pytest.approx(-expected, abs=1e-7)


def test_spec_builds_a_proximal_client_and_a_fedavg_round(tmp_path):
    sc = fl_helpers.scenario_from_dict(
        {
            "name": "wiring",
            "data": {"dataset": "synthetic", "partition": "iid"},
            "model": {"name": "lenet5"},
            "federation": {"num_clients": 3, "active_clients": 2},
            "algorithm": {"name": "fedprox", "params": {"mu": 0.3}},
        }
    )
    assert sc.params.mu == 0.3 and sc.params.aggregation == "data-size"
    # the server is FedAvg's: with |D| = (1, 3) the round average weights the two models ¼ and ¾
    server = fl_helpers.tiny_server("fedprox", {"mu": 0.3}, sizes=(1, 3))
    server.send_model(0)
    server.send_model(1)
    server.on_client_model(0, wt(5.0, 2.0), 1)
    assert server.version == 0
    server.on_client_model(1, wt(1.0, 6.0), 3)
    assert torch.equal(server.global_model()[KEY], wt(2.0, 5.0)[KEY])
    uniform = fl_helpers.tiny_server("fedprox", {"aggregation": "uniform"}, sizes=(1, 3))
    uniform.send_model(0)
    uniform.send_model(1)
    uniform.on_client_model(0, wt(5.0, 2.0), 1)
    uniform.on_client_model(1, wt(1.0, 6.0), 3)
    assert torch.equal(uniform.global_model()[KEY], wt(3.0, 4.0)[KEY])


def test_mu_reaches_the_pool_client():
    setup = fl_helpers.tiny_server("fedprox", {"mu": 0.25}).setup
    x = np.zeros((3, 1, 28, 28), dtype=np.uint8)
    model = fl_helpers.SplitModel(nn.Linear(1, 2), nn.Identity(), None, "t", "s", (2,), (1,))
    client = ALGORITHMS["fedprox"].make_client(setup, model, x, np.zeros(3, dtype=np.int64), lambda a, g: a)
    assert client.proximal == 0.25 and client.objective is None


TINY = {
    "name": "tiny-equiv",
    "seed": 5,
    "data": {"dataset": "synthetic", "partition": "shard", "synthetic_train": 400, "synthetic_test": 100},
    "model": {"name": "lenet5"},
    "federation": {"num_clients": 5, "active_clients": 3},
    "train": {"global_iterations": 2, "local_iterations": 2, "batch_size": 16, "eval_every": 1},
    "algorithm": {"name": "fedavg"},
    "metrics": {"progress": False, "tensorboard": False, "events": False},
}


@pytest.mark.parametrize("name", ["fedprox", "moon"])
def test_zero_regulariser_is_fedavg_exactly(tmp_path, name):
    """μ = 0: FedProx and MOON train the same weights as FedAvg (same draws, batches and arithmetic)."""
    _, _, ref = fl_helpers.run_scenario(TINY, tmp_path, name="fedavg")
    over = [f'algorithm.name="{name}"', "algorithm.params.mu=0"]
    _, _, got = fl_helpers.run_scenario(TINY, tmp_path, over, name=name)
    assert [(m["t"], m["accuracy"], m["loss"]) for m in got] == [
        (m["t"], m["accuracy"], m["loss"]) for m in ref
    ]
    _, _, prox = fl_helpers.run_scenario(
        TINY, tmp_path, [*over[:1], "algorithm.params.mu=1"], name=f"{name}1"
    )
    assert [m["loss"] for m in prox][1:] != [m["loss"] for m in ref][1:]


# --- systems heterogeneity (Sec. 5): stragglers with partial work ------------------------------------------
def fedprox_policy(params, num_clients=6, active=4, local_iterations=8, seed=7):
    sizes = {"num_clients": num_clients, "active": active, "local_iterations": local_iterations}
    return fl_helpers.fl_policy("fedprox", params, **sizes, seed=seed)


def train_calls(actions):
    return {a.client: a for a in actions if isinstance(a, Call) and a.method == "train"}


def test_stragglers_run_their_drawn_steps_and_finish_sooner():
    """C = 4, fraction ½ → 2 stragglers; the draws replayed on the same stream: C of K, the 2 stragglers, then
    each straggler's steps s ~ U{1..E}; its job lasts 1 + 0.5·s + 1 s instead of 1 + 0.5·8 + 1 = 6 s."""
    policy = fedprox_policy({"straggler_fraction": 0.5})
    calls = train_calls(policy.start())
    rng = np.random.default_rng(7)
    chosen = sorted(int(c) for c in rng.choice(list(range(6)), size=4, replace=False))
    slow = sorted(int(c) for c in rng.choice(chosen, size=2, replace=False))
    drawn = {k: int(rng.integers(1, 9)) for k in slow}
    assert sorted(calls) == chosen and policy.stragglers == 2 and policy.partial == {}
    for k, call in calls.items():
        if k in slow:
            assert call.args[1:] == (1.0, drawn[k]) and call.pace_s == 2.0 + 0.5 * drawn[k]
            assert policy.active[k].steps == drawn[k] and policy.steps[k] == drawn[k]
        else:
            assert len(call.args) == 1 and call.pace_s == 6.0 and policy.steps[k] == 8
    k = slow[0]
    rows = [a.row for a in policy.on_event(Event(2.0 + 0.5 * drawn[k], "model", k)) if isinstance(a, Log)]
    assert rows[0]["e"] == drawn[k]  # the event log shows the partial work


def test_no_straggler_draw_when_the_fraction_rounds_to_zero():
    """round(0.1·4) = 0: not a single extra draw, so the policy stream and the jobs are the plain policy's."""
    plain = fedprox_policy({})
    some = fedprox_policy({"straggler_fraction": 0.1})
    assert train_calls(plain.start()) == train_calls(some.start())
    assert plain.rng.bit_generator.state == some.rng.bit_generator.state and some.stragglers == 0


def test_dropped_stragglers_run_no_job_and_the_round_is_smaller():
    policy = fedprox_policy({"straggler_fraction": 0.5, "drop_stragglers": True})
    calls = train_calls(policy.start())
    assert len(calls) == 2 and policy.per_update == 2 and policy.stragglers == 2
    assert all(len(c.args) == 1 for c in calls.values())  # the others do full work
    server = fl_helpers.tiny_server(
        "fedprox", {"straggler_fraction": 0.5, "drop_stragglers": True}, sizes=(1,) * 4, active=4
    )
    assert server.round_size == 2
    with pytest.raises(ValueError, match="no device"):
        fedprox_policy({"straggler_fraction": 1.0, "drop_stragglers": True})


def test_client_runs_the_given_number_of_steps():
    """steps = 1 of E = 2: the single hand-computed first step w_1 = [0.05, −0.05]; the cursor moved once."""
    client, state = one_sample_client(0.0, steps=2)
    out = client.train(state, {"0.weight": torch.zeros(2, 1)}, 1.0, 1)["0.weight"]
    assert out.flatten().tolist() == pytest.approx([0.05, -0.05], abs=1e-7)
    full, full_state = one_sample_client(0.0, steps=1)
    assert torch.equal(out, full.train(full_state, {"0.weight": torch.zeros(2, 1)})["0.weight"])


def job_times(events):
    """client -> (local steps, download-to-upload time) of the first round's jobs (version 0)."""
    starts = {e["client"]: e["t"] for e in events if e["kind"] == "start" and e["version"] == 0}
    return {
        e["client"]: (e["e"], e["t"] - starts[e["client"]])
        for e in events
        if e["kind"] == "model" and e["version"] == 0
    }


def no_wall(metrics):
    return [{k: v for k, v in m.items() if k != "wall_s"} for m in metrics]


def test_engine_run_with_stragglers(tmp_path):
    """C = 3, fraction ⅔ → 2 stragglers a round, each with e in {1..4}; fraction 0.1 (0 stragglers) is
    FedAvg's run exactly; dropping leaves one model a round."""
    base = ["train.local_iterations=4", "train.global_iterations=3", "metrics.events=true"]
    _, ref_events, ref = fl_helpers.run_scenario(TINY, tmp_path, base, name="fedavg")
    prox = [*base, 'algorithm.name="fedprox"', "algorithm.params.mu=0"]
    _, events, got = fl_helpers.run_scenario(
        TINY, tmp_path, [*prox, "algorithm.params.straggler_fraction=0.1"], name="p0"
    )
    assert events == ref_events and no_wall(got) == no_wall(ref)
    _, events, got = fl_helpers.run_scenario(
        TINY, tmp_path, [*prox, "algorithm.params.straggler_fraction=0.67"], name="p2"
    )
    es = [e["e"] for e in events if e["kind"] == "model"]
    assert len(es) == 9 and sum(e < 4 for e in es) >= 1 and all(1 <= e <= 4 for e in es)
    # round 1 draws the same devices as FedAvg (stragglers are drawn after them): a straggler's job is
    # shorter than the same device's full job by its skipped steps' compute time, a full one as long
    first, ref_first = job_times(events), job_times(ref_events)
    assert sorted(first) == sorted(ref_first)
    for k, (e, dur) in first.items():
        assert dur < ref_first[k][1] if e < 4 else dur == ref_first[k][1]
    assert any(e < 4 for e, _ in first.values())  # seed 5: round 1's stragglers drew 1 and 3 steps
    over = [*prox, "algorithm.params.straggler_fraction=0.67", "algorithm.params.drop_stragglers=true"]
    _, events, got = fl_helpers.run_scenario(TINY, tmp_path, over, name="drop")
    assert [e["e"] for e in events if e["kind"] == "model"] == [4, 4, 4] and got[-1]["updates"] == 3


@pytest.mark.parametrize("drop", [False, True])
def test_resume_with_stragglers(tmp_path, drop):
    doc = {
        **TINY,
        "train": {**TINY["train"], "global_iterations": 4, "local_iterations": 4},
        "algorithm": {"name": "fedprox", "params": {"straggler_fraction": 0.67, "drop_stragglers": drop}},
        "metrics": {**TINY["metrics"], "events": True},
    }
    fl_helpers.resumes_identically(doc, tmp_path)


def test_dropping_every_straggler_of_a_round_is_refused_at_load_time():
    """round(0.75·2) = 2 of C = 2 dropped left no device; it used to fail only once the run started."""
    from raysfl.config import ConfigError

    doc = {**TINY, "algorithm": {"name": "fedprox", "params": {"drop_stragglers": True}}}
    with pytest.raises(ConfigError) as err:
        fl_helpers.scenario_from_dict(
            doc, ["federation.active_clients=2", "algorithm.params.straggler_fraction=0.75"]
        )
    (problem,) = err.value.problems
    assert problem.startswith("algorithm.params.straggler_fraction: round(0.75·C) = 2 stragglers of C = 2")
    assert "use a fraction below 0.75" in problem
    keep = ["federation.active_clients=2", "algorithm.params.straggler_fraction=0.5"]  # one dropped: fine
    assert fl_helpers.scenario_from_dict(doc, keep).params.drop_stragglers
