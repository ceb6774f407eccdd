"""ASO-Fed (no Ray): the decayed update correction and the |D_k|/n server step by hand, λ's wiring, the
dynamic local step size and the first-layer feature re-weighting."""

import math

import fl_helpers
import numpy as np
import pytest
import torch
from fl_helpers import KEY, wt
from torch import nn

from raysfl.algorithms import ALGORITHMS
from raysfl.algorithms.actions import Call, Event, Slot
from raysfl.algorithms.aso_fed import corrected_update, feature_attention, step_factor
from raysfl.algorithms.base import RunSetup


def test_corrected_update_by_hand():
    s = {"a": torch.tensor([3.0, 1.0])}
    s_prev = {"a": torch.tensor([1.0, 1.0], dtype=torch.float64)}
    h_prev = {"a": torch.tensor([0.5, -2.0], dtype=torch.float64)}
    zeta, h = corrected_update(s, s_prev, h_prev, 0.25)
    assert zeta["a"].tolist() == [2.5, -2.0]  # s − s_prev + h_prev
    assert h["a"].tolist() == [0.875, 0.25]  # ¼·h_prev + ¾·s_prev


def test_server_sequence_by_hand():
    """|D| = (1, 2, 1), n = 4, β = 0.5, w = [1, 2]; device 0 reports three times.

    1: s = −[2, 0]; ζ = s → w = [1, 2] − ¼ζ = [1.5, 2]; h = 0.
    2: s = −[0, 2]; ζ = s − s_prev + 0 = [2, −2] → w = [1, 2.5]; h = ½·0 + ½·s_prev = [−1, 0].
    3: s = 0; ζ = 0 − [0, −2] + [−1, 0] = [−1, 2] → w = [1.25, 2]; h = ½[−1, 0] + ½[0, −2] = [−½, −1].
    """
    server = fl_helpers.tiny_server("aso_fed", {"beta": 0.5}, sizes=(1, 2, 1), active=2)
    server.send_model(0)
    server.on_client_model(0, wt(3.0, 2.0), 1)
    assert torch.allclose(server.global_model()[KEY], wt(1.5, 2.0)[KEY])
    server.send_model(0)
    server.on_client_model(0, wt(1.5, 4.0), 1)
    assert torch.allclose(server.global_model()[KEY], wt(1.0, 2.5)[KEY])
    server.send_model(0)
    server.on_client_model(0, wt(1.0, 2.5), 1)
    assert torch.allclose(server.global_model()[KEY], wt(1.25, 2.0)[KEY])
    s_prev, h = server.history[0]
    assert s_prev[KEY].flatten().tolist() == [0.0, 0.0] and h[KEY].flatten().tolist() == [-0.5, -1.0]
    ev = server.evaluate()
    assert ev["updates"] == 3 and ev["devices_seen"] == 1


def test_every_arrival_is_one_update_and_devices_keep_separate_histories():
    server = fl_helpers.tiny_server("aso_fed", sizes=(2, 2), active=2)
    server.send_model(0)
    server.send_model(1)
    server.on_client_model(1, wt(1.0, 6.0), 2)  # Δ = [0, 4] → w − ½·(−[0, 4]) = [1, 4]
    server.on_client_model(0, wt(3.0, 2.0), 2)  # stale by 1; its own first report: w + ½·[2, 0]
    assert torch.allclose(server.global_model()[KEY], wt(2.0, 4.0)[KEY])
    assert server.version == 2 and set(server.history) == {0, 1}


def test_local_constraint_lambda_reaches_the_client():
    setup = fl_helpers.tiny_server("aso_fed", {"lam": 0.2}).setup
    model = fl_helpers.SplitModel(nn.Linear(1, 2), nn.Identity(), None, "t", "s", (2,), (1,))
    x = np.zeros((3, 1, 28, 28), dtype=np.uint8)
    client = ALGORITHMS["aso_fed"].make_client(setup, model, x, np.zeros(3, dtype=np.int64), None)
    assert client.proximal == pytest.approx(0.2)


# --- dynamic local step size (Sec. 4.2) and first-layer feature re-weighting (Sec. 4.1) ---------------------
def aso_policy(dynamic_step, num_clients=3, local_iterations=2):
    params = {"dynamic_step": dynamic_step}
    return fl_helpers.fl_policy(
        "aso_fed", params, num_clients=num_clients, active=2, local_iterations=local_iterations, seed=0
    )


def train_args(actions):
    (call,) = [a for a in actions if isinstance(a, Call) and a.method == "train"]
    return call.args


def test_step_factor_by_hand():
    assert step_factor(0.0, 0) == 1.0  # no past round: r = 1
    assert step_factor(2.0, 1) == 1.0  # ln 2 < 1
    assert step_factor(10.0, 1) == pytest.approx(math.log(10.0))
    assert step_factor(14.0, 2) == pytest.approx(math.log(7.0))


def test_dynamic_step_updates_counts_versions_between_downloads():
    """Downloads at versions 0, 10, 14: gaps 10 and 4 → r = 1, ln 10, ln 7 (= ln mean(10, 4))."""
    policy = aso_policy("updates")
    assert train_args(policy._start_job(0, 0.0))[1] == 1.0
    policy.active.pop(0)
    policy.version = 10
    assert train_args(policy._start_job(0, 1.0))[1] == pytest.approx(math.log(10.0))
    policy.active.pop(0)
    policy.version = 14
    assert train_args(policy._start_job(0, 2.0))[1] == pytest.approx(math.log(7.0))
    assert (policy.cost_sum[0], policy.cost_count[0], policy.last_download[0]) == (14.0, 2, 14)
    assert policy.cost_count[1] == 0 and policy.last_download[1] == -1


def test_dynamic_step_seconds_averages_past_job_times():
    """E = 20 steps of 0.5 s + 1 s + 1 s = 12 s per job: r = 1 for the first job, then ln 12."""
    policy = aso_policy("seconds", local_iterations=20)
    assert train_args(policy._start_job(1, 0.0))[1] == 1.0
    actions = policy.on_event(Event(12.0, "model", 1))
    assert any(isinstance(a, Call) and a.method == "on_client_model" for a in actions)
    assert (policy.cost_sum[1], policy.cost_count[1]) == (12.0, 1)
    assert train_args(policy._start_job(1, 12.0))[1] == pytest.approx(math.log(12.0))


def test_dynamic_step_off_sends_no_factor():
    policy = aso_policy("off")
    assert train_args(policy._start_job(0, 0.0)) == (Slot(("w0", 0)),)


def test_feature_attention_on_a_2x3_weight_by_hand():
    """Row [0, ln 2, ln 5]: softmax = [1, 2, 5]/8 → [0, ln2/4, 5·ln5/8]; row [1, 1, 1]: ⅓ each."""
    w = torch.tensor([[0.0, math.log(2.0), math.log(5.0)], [1.0, 1.0, 1.0]], dtype=torch.float64)
    bias = torch.tensor([3.0, -1.0], dtype=torch.float64)
    out = feature_attention({"bias0": torch.tensor(7.0), "w": w, "b": bias, "w2": w.clone()})
    expected = [[0.0, math.log(2.0) / 4, 5 * math.log(5.0) / 8], [1 / 3, 1 / 3, 1 / 3]]
    assert torch.allclose(out["w"], torch.tensor(expected, dtype=torch.float64), atol=1e-15)
    assert out["b"] is bias and torch.equal(out["w2"], w)  # bias and later layers untouched
    conv = feature_attention({"c": w.float().reshape(2, 3, 1, 1)})["c"]  # (out, in, kh, kw) flattened per out
    assert conv.shape == (2, 3, 1, 1) and torch.allclose(conv.reshape(2, 3), out["w"].float())


def test_server_reweights_the_first_layer_after_each_update():
    """Linear(3, 2), w = 0, |D| = (1, 1): the arrival W_k = 2·W, bias [2, 4] steps to w = W, bias [1, 2];
    then W ← W ⊙ softmax(W) with W the 2×3 example above; the bias stays [1, 2]."""
    sc = fl_helpers.scenario_from_dict(
        {
            "name": "aso-att",
            "data": {"dataset": "synthetic", "partition": "iid"},
            "model": {"name": "lenet5"},
            "federation": {"num_clients": 2, "active_clients": 2},
            "algorithm": {"name": "aso_fed", "params": {"feature_attention": "softmax"}},
        }
    )
    setup = RunSetup(sc, sc.params, (1, 1, 1), 2, (np.arange(1), np.arange(1)), np.ones((2, 2)))
    lin = nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight.zero_()
        lin.bias.zero_()
    model = fl_helpers.SplitModel(lin, nn.Identity(), None, "tiny", "s", (2,), (3,))
    server = ALGORITHMS["aso_fed"].make_server(
        setup, model, torch.zeros(2, 3), torch.tensor([0, 1]), 0, "cpu"
    )
    w = torch.tensor([[0.0, math.log(2.0), math.log(5.0)], [1.0, 1.0, 1.0]])
    server.send_model(0)
    server.on_client_model(0, {"client.weight": 2 * w, "client.bias": torch.tensor([2.0, 4.0])}, 1)
    expected = torch.tensor([[0.0, math.log(2.0) / 4, 5 * math.log(5.0) / 8], [1 / 3, 1 / 3, 1 / 3]])
    assert torch.allclose(server.global_model()["client.weight"], expected, atol=1e-6)
    assert server.global_model()["client.bias"].tolist() == [1.0, 2.0]


ENGINE = {
    "name": "aso-engine",
    "seed": 4,
    "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 300, "synthetic_test": 60},
    "model": {"name": "lenet5"},
    "federation": {"num_clients": 5, "active_clients": 3},
    "train": {"global_iterations": 12, "local_iterations": 2, "batch_size": 16, "eval_every": 4},
    "algorithm": {"name": "aso_fed"},
    "metrics": {"progress": False, "tensorboard": False, "events": True},
}


SLOW = ['system.compute.kind="fixed"', "system.compute.flops_per_s=1e7"]  # jobs of several seconds


@pytest.mark.parametrize(
    ("option", "system"),
    [('dynamic_step="updates"', []), ('dynamic_step="seconds"', SLOW), ('feature_attention="softmax"', [])],
)
def test_options_change_training_but_not_the_schedule(tmp_path, option, system):
    """Each option leaves the virtual-time schedule (events) unchanged and changes the trained model.

    ``seconds``: r_k > 1 needs jobs longer than e ≈ 2.7 emulated seconds, hence slow fixed-rate devices.
    """
    _, ref_events, ref = fl_helpers.run_scenario(ENGINE, tmp_path, system, name="off")
    assert (
        option != 'dynamic_step="seconds"' or min(e["t"] for e in ref_events if e["kind"] == "model") > math.e
    )
    _, events, got = fl_helpers.run_scenario(
        ENGINE, tmp_path, [*system, f"algorithm.params.{option}"], name="on"
    )
    assert events == ref_events
    assert [m["loss"] for m in got][1:] != [m["loss"] for m in ref][1:]


@pytest.mark.parametrize(
    ("params", "system"),
    [({"dynamic_step": "updates", "feature_attention": "softmax"}, []), ({"dynamic_step": "seconds"}, SLOW)],
)
def test_resume_keeps_the_time_cost_history(tmp_path, params, system):
    doc = dict(ENGINE)
    if system:
        doc["system"] = {"compute": {"kind": "fixed", "flops_per_s": 1e7}}
    doc["train"] = {**ENGINE["train"], "global_iterations": 8, "eval_every": 2}
    doc["algorithm"] = {"name": "aso_fed", "params": params}
    fl_helpers.resumes_identically(doc, tmp_path)
