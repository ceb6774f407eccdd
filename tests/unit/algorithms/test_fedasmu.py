"""FedASMU / FedSSMU (no Ray): Eq. (2) and the learned controls by hand, the discard rule, the device merge,
the mid-training download's version, FedSSMU's rounds and an end-to-end run above chance."""

import functools
import math
from typing import Any

import fl_helpers
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from fl_helpers import KEY, wt
from torch import nn

from raysfl import profiling
from raysfl.algorithms import ALGORITHMS
from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.config import TrainConfig
from raysfl.algorithms.fedasmu.client import MUClient
from raysfl.algorithms.fedasmu.control import (
    AggregationRecord,
    ServerControls,
    control_gradients,
    device_phi,
    squash,
    staleness_xi,
)
from raysfl.algorithms.fedasmu.params import FedASMUParams
from raysfl.algorithms.fedasmu.server import MUServer
from raysfl.algorithms.fedasmu.slots import MetaPolicy, next_slot, q_update
from raysfl.config import ConfigError
from raysfl.models.split import SplitModel

BASE = {
    "name": "tiny-fedasmu",
    "seed": 3,
    "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 600, "synthetic_test": 200},
    "model": {"name": "lenet5"},
    "federation": {"num_clients": 8, "active_clients": 3},
    "train": {"global_iterations": 40, "batch_size": 16, "eval_every": 10, "lr": 0.05, "momentum": 0.0},
    "algorithm": {"name": "fedasmu", "params": {"local_epochs": 3, "trigger_period": 0.05}},
    "system": {
        "compute": {"kind": "ratio", "max_flops_per_s": 1e9},
        "link": {"kind": "uniform", "downlink_to_uplink": 5.0},
    },
    "metrics": {"progress": False, "tensorboard": False},
}


def alpha_of(lam, sigma, iota, t, s, mu=10.0):
    """Eq. (2) written out: α = μξ/(1 + μξ), ξ = λ/(√t·s^σ) + ι."""
    xi = lam / (math.sqrt(t) * s**sigma) + iota
    return mu * xi / (1 + mu * xi)


# --- Eq. (2) and the control gradients (Eqs. 3-5) -----------------------------------------------
def test_staleness_weight_by_hand():
    # spec §3.8's table for μ_α = 10, λ = 1, σ = 0.5, ι = 0
    assert squash(staleness_xi(1, 0.5, 0, 1, 1), 10) == pytest.approx(10 / 11)
    assert squash(staleness_xi(1, 0.5, 0, 100, 1), 10) == pytest.approx(0.5)
    assert squash(staleness_xi(1, 0.5, 0, 250, 5), 10) == pytest.approx(0.22, abs=0.005)
    assert squash(staleness_xi(1, 0.5, 0, 500, 10), 10) == pytest.approx(0.124, abs=0.001)
    assert staleness_xi(2.0, 1.0, 0.25, 4, 2) == pytest.approx(2 / (2 * 2) + 0.25)
    with pytest.raises(ValueError):
        staleness_xi(1, 0.5, 0, 0, 1)  # √0: the √-index is 1-based (spec A8)


@pytest.mark.parametrize("s_p", [1, 3])
def test_control_gradients_match_finite_differences(s_p):
    """G·∂α/∂(λ, σ, ι) at device i's previous aggregation (t_p = 5, s_p), against central differences."""
    lam, sigma, iota, t_p, big_g = 0.8, 0.7, 0.05, 5, -1.7
    xi = staleness_xi(lam, sigma, iota, t_p, s_p)
    got = control_gradients(big_g, ServerControls(lam, sigma, iota), AggregationRecord(t_p, s_p, xi), 10.0)
    h = 1e-6
    fd = [
        big_g
        * (alpha_of(lam + h, sigma, iota, t_p, s_p) - alpha_of(lam - h, sigma, iota, t_p, s_p))
        / (2 * h),
        big_g
        * (alpha_of(lam, sigma + h, iota, t_p, s_p) - alpha_of(lam, sigma - h, iota, t_p, s_p))
        / (2 * h),
        big_g
        * (alpha_of(lam, sigma, iota + h, t_p, s_p) - alpha_of(lam, sigma, iota - h, t_p, s_p))
        / (2 * h),
    ]
    assert got == pytest.approx(fd, rel=1e-6, abs=1e-12)
    if s_p == 1:
        assert got[1] == 0.0  # ln 1 = 0: σ does not learn from staleness-1 aggregations


def test_paper_sigma_derivative_uses_ln_sigma():
    """Eq. (5) as printed: the factor ln σ instead of λ·ln s (spec A6)."""
    lam, sigma, t_p, s_p, big_g, mu = 0.8, 0.7, 5, 3, 2.0, 10.0
    xi = staleness_xi(lam, sigma, 0.0, t_p, s_p)
    rec, ctl = AggregationRecord(t_p, s_p, xi), ServerControls(lam, sigma, 0.0)
    c = mu / (1 + mu * xi) ** 2
    q = 1 / (math.sqrt(t_p) * s_p**sigma)
    assert control_gradients(big_g, ctl, rec, mu, "paper")[1] == pytest.approx(
        -big_g * c * q * math.log(sigma)
    )
    assert control_gradients(big_g, ctl, rec, mu, "exact")[1] == pytest.approx(
        -big_g * c * q * lam * math.log(3)
    )


def server(params=None, start=(1.0, 2.0)):
    """FedASMU's server on fl_helpers' 2-parameter model (Linear(1, 2) without bias), plain SGD."""
    sc = fl_helpers.scenario_from_dict(
        {
            "name": "tiny",
            "data": {"dataset": "synthetic", "partition": "iid"},
            "model": {"name": "lenet5"},
            "federation": {"num_clients": 3, "active_clients": 3},
            "train": {"momentum": 0.0, "lr": 0.01},
            "algorithm": {"name": "fedasmu", "params": {"local_epochs": 5, **(params or {})}},
        }
    )
    setup = RunSetup(sc, sc.params, (1, 1, 1), 2, tuple(np.arange(1) for _ in range(3)), np.ones((3, 2)))
    lin = nn.Linear(1, 2, bias=False)
    with torch.no_grad():
        lin.weight.copy_(wt(*start)[KEY])
    model = SplitModel(lin, nn.Identity(), None, "tiny", "s", (2,), (1,))
    test_x, test_y = torch.tensor([[1.0], [-1.0]]), torch.tensor([0, 1])
    return ALGORITHMS["fedasmu"].make_server(setup, model, test_x, test_y, 0, "cpu")


def upload(a, b, lr=0.01, steps=5):
    return {"weights": wt(a, b), "meta": {"lr": lr, "steps": steps}}


@pytest.mark.parametrize("sign", ["consistent", "paper"])
def test_server_learns_controls_by_hand(sign):
    """Two arrivals of device 0; the second differentiates through the first (own record, spec §3.3).

    w_0 = [1, 2]. Devices 0 and 1 start at v0. Device 1 uploads [1, 4] (s = 1, t = 1): ξ = 1, α = 10/11.
    Device 0 uploads [3, 2] (s = 2, t = 2): ξ = 1/(√2·√2) = 0.5, α = 5/6; its record d_p = [3, 2] − w_1.
    Device 0 restarts at v2 and uploads w_2 + [0.1, −0.2] (s = 1, t = 3): ĝ = ∓[0.1, −0.2]/(η𝓛), G = ⟨ĝ, d_p⟩.
    """
    eta = 0.05
    srv = server({"eta_lambda": eta, "eta_sigma": eta, "eta_iota": eta, "alpha_grad_sign": sign})
    srv.send_job(0)
    srv.send_job(1)
    srv.on_client_model(1, upload(1.0, 4.0), 1)
    w1 = np.array([1.0, 2.0]) * (1 / 11) + np.array([1.0, 4.0]) * (10 / 11)
    assert srv.global_model()[KEY].flatten().tolist() == pytest.approx(w1.tolist())
    srv.on_client_model(0, upload(3.0, 2.0), 1)
    w2 = w1 / 6 + np.array([3.0, 2.0]) * 5 / 6
    assert srv.global_model()[KEY].flatten().tolist() == pytest.approx(w2.tolist(), rel=1e-6)
    assert srv.control_table()[0] == (1.0, 0.5, 0.0)  # no record before its first aggregation: no update
    d_p = np.array([3.0, 2.0]) - w1
    srv.send_job(0)
    step = np.array([0.1, -0.2])
    base = srv.global_model()[KEY].flatten().double().numpy()
    srv.on_client_model(0, upload(*(base + step).tolist()), 1)
    g_hat = (-1 if sign == "consistent" else 1) * step / (0.01 * 5)
    big_g = float(g_hat @ d_p)
    c = 10 / (1 + 10 * 0.5) ** 2
    q = 1 / (math.sqrt(2) * 2**0.5)
    lam = 1 - eta * big_g * c * q
    sigma = 0.5 - eta * big_g * c * (-1.0 * math.log(2)) * q
    iota = max(0.0 - eta * big_g * c, 0.0)
    assert srv.control_table()[0] == pytest.approx((max(lam, 0), max(sigma, 0), iota), rel=1e-5)
    # the third aggregation uses the updated controls: t = 3, s = 1
    alpha = alpha_of(max(lam, 0), max(sigma, 0), iota, 3, 1)
    w3 = (1 - alpha) * w2 + alpha * (base + step)
    assert srv.global_model()[KEY].flatten().tolist() == pytest.approx(w3.tolist(), rel=1e-5)
    assert srv.version == 3 and srv.evaluate()["discarded"] == 0


@pytest.mark.parametrize("sign", ["consistent", "paper"])
def test_literal_previous_version_learns_through_the_aggregation_that_made_the_base(sign):
    """control_record = "literal-prev-version" (the paper's "(o−1)-th aggregation", spec §3.3 item 4).

    w_0 = [1, 2]; devices 0 and 1 start at v0. Device 1 uploads [1, 4] (t = 1, s = 1, ξ = 1): v1, whose
    record is d = [1, 4] − w_0. Device 2 starts at v1. Device 0 uploads [3, 2] (s = 2): its base v0 has no
    producing aggregation, so nothing is learnt. Device 2 uploads w_1 + [0.1, −0.2] (s = 2): it learns through
    device 1's aggregation (t = 1, s = 1, ξ = 1), with its own, initial controls (λ, σ, ι) = (1, 0.5, 0).
    With the default own record, device 2 has none and would not learn.
    """
    eta = 0.05
    params = {"eta_lambda": eta, "eta_sigma": eta, "eta_iota": eta, "alpha_grad_sign": sign}
    srv = server({**params, "control_record": "literal-prev-version"})
    srv.send_job(0)
    srv.send_job(1)
    srv.on_client_model(1, upload(1.0, 4.0), 1)
    d_1 = np.array([1.0, 4.0]) - np.array([1.0, 2.0])
    srv.send_job(2)
    w1 = srv.global_model()[KEY].flatten().double().numpy()
    srv.on_client_model(0, upload(3.0, 2.0), 1)
    assert srv.control_table()[0] == (1.0, 0.5, 0.0)
    step = np.array([0.1, -0.2])
    srv.on_client_model(2, upload(*(w1 + step).tolist()), 1)
    big_g = float((-1 if sign == "consistent" else 1) * step / (0.01 * 5) @ d_1)
    c = 10 / (1 + 10 * 1.0) ** 2  # q = 1/(√1·1^σ) = 1; ∂ξ/∂σ = −λ·ln(1)·q = 0
    expected = (max(1 - eta * big_g * c, 0), 0.5, max(-eta * big_g * c, 0.0))
    assert srv.control_table()[2] == pytest.approx(expected, rel=1e-6)
    assert set(srv.records) == {3}  # no open job: only the current version's record is kept
    own = server(params)
    for k in (0, 1):
        own.send_job(k)
    own.on_client_model(1, upload(1.0, 4.0), 1)
    own.send_job(2)
    own.on_client_model(0, upload(3.0, 2.0), 1)
    own.on_client_model(2, upload(1.1, 1.8), 1)
    assert own.control_table()[2] == (1.0, 0.5, 0.0)


def test_learn_alpha_false_keeps_controls():
    """FedASMU-DA (spec §3.10): fixed controls, α from Eq. (2) only."""
    srv = server({"learn_alpha": False, "eta_lambda": 1.0})
    for _ in range(3):
        srv.send_job(0)
        srv.on_client_model(0, upload(5.0, 5.0), 1)
    assert srv.control_table()[0] == (1.0, 0.5, 0.0)


def test_discard_rule():
    """τ = 2: an upload with staleness s = v − o + 1 = 3 is dropped and leaves the version; s = 2 is taken."""
    srv = server({"tau": 2})
    for k in (0, 1, 2):
        srv.send_job(k)
    srv.on_client_model(1, upload(1.0, 1.0), 1)  # s = 1
    srv.on_client_model(2, upload(2.0, 2.0), 1)  # s = 2 = τ: aggregated
    before = {k: v.clone() for k, v in srv.global_model().items()}
    assert srv.version == 2
    srv.on_client_model(0, upload(9.0, 9.0), 1)  # s = 3 > τ: discarded
    assert srv.version == 2 and torch.equal(srv.global_model()[KEY], before[KEY])
    ev = srv.evaluate()
    assert ev["discarded"] == 1 and ev["arrivals"] == 3 and ev["updates"] == 2


def test_discards_on_the_engine_match_the_rule(tmp_path):
    """τ = 1 with many concurrent trainings: every upload with staleness ≥ 1 is logged as discarded and the
    version counts only the others."""
    summary, events, metrics = fl_helpers.run_scenario(
        BASE,
        tmp_path,
        ["algorithm.params.tau=1", "train.global_iterations=6", "algorithm.params.request_slot='none'"],
    )
    models = [e for e in events if e["kind"] == "model"]
    taken = [e["server_update"] == 1 for e in models]
    assert models and all(t == (e["staleness"] == 0) for t, e in zip(taken, models, strict=True))
    assert all(e["discarded"] == (0 if t else 1) for t, e in zip(taken, models, strict=True))
    assert sum(taken) == metrics[-1]["updates"] == 6
    assert metrics[-1]["discarded"] == sum(e["discarded"] for e in models) > 0


# --- device side (Eqs. 8-11) --------------------------------------------------------------------
def tiny_client(params):
    lin = nn.Linear(1, 2, bias=False)
    train = TrainConfig(batch_size=1, lr=0.1, momentum=0.0, weight_decay=0.0)
    x = np.ones((4, 1), dtype=np.float32)
    return MUClient(
        lin, x, np.zeros(4, dtype=np.int64), lambda a, g: torch.from_numpy(a), train, params=params
    )


def test_device_merge_by_hand():
    """β (Eq. 10), the merge (Eq. 9), γ/υ (Eq. 11) and the reward, on Linear(1, 2), x = 1, y = 0."""
    p = FedASMUParams(local_epochs=3, eta_gamma=0.5, eta_upsilon=0.5)
    client = tiny_client(p)
    st = client.init_state(0, np.arange(4), np.random.SeedSequence(1))
    st.weights = {"weight": torch.tensor([[0.0], [1.0]])}
    st.job = {"version": 1}
    st.meta = {"fresh_version": None, "slot": 2}
    fresh = {"weights": {"weight": torch.tensor([[2.0], [0.0]])}, "version": 4, "index": 4}
    st.pending = (-math.inf, fresh)
    st.job["model_bytes"] = 8
    client._merge(st, torch.ones(1, 1), torch.zeros(1, dtype=torch.long))
    gap = 4 - 1 + 1
    phi = 1.0 / 2 * (1 - 0.5 / 2)  # (γ/√g)(1 − υ/√gap) with γ = 1, υ = 0.5, g = 4
    assert phi == device_phi(1.0, 0.5, 4, gap)
    beta = 10 * phi / (1 + 10 * phi)
    merged = np.array([0.0, 1.0]) * (1 - beta) + np.array([2.0, 0.0]) * beta
    assert client.model.weight.detach().flatten().tolist() == pytest.approx(merged.tolist(), rel=1e-6)
    p0 = math.exp(merged[0]) / (math.exp(merged[0]) + math.exp(merged[1]))
    g_m = np.array([p0 - 1, 1 - p0])  # ∂CE/∂logits · x
    dot = float((np.array([2.0, -1.0])) @ g_m)  # ⟨w_g − w, g_m⟩
    k = 10 / (math.sqrt(4) * (1 + 10 * phi) ** 2)
    assert st.gamma == pytest.approx(1.0 - 0.5 * dot * k * (1 - 0.5 / 2))
    assert st.upsilon == pytest.approx(0.5 - 0.5 * (-dot * k * 1.0 / 2))
    loss_b = -math.log(math.exp(0) / (math.exp(0) + math.exp(1)))
    assert st.meta["reward"] == pytest.approx(loss_b + math.log(p0))
    assert st.meta["beta"] == pytest.approx(beta) and st.meta["fresh_version"] == 4


def test_a_device_learns_its_request_slot_with_eq_8():
    """Two trainings of one device with ``request_slot = "rl"`` and ε = 0 (greedy).

    The first takes the server's proposal and learns nothing. The second moves l* by the greedy action (ties
    take the first, add) and, when its fresh model is merged, updates 𝓗(previous l*, action) by Eq. (8) with
    the merge's reward (computed by hand in test_device_merge_by_hand).
    """
    p = FedASMUParams(local_epochs=5, request_slot="rl", epsilon=0.0, q_lr=0.5, q_discount=0.9)
    client = tiny_client(p)
    st = client.init_state(0, np.arange(4), np.random.SeedSequence(1))
    base = {"weights": {"weight": torch.tensor([[0.0], [1.0]])}, "version": 1, "proposal": 3}
    job = {"lr": 0.1, "model_bytes": 8}
    assert client.begin(st, base, job) == 3  # first training: the proposal, no action to learn from
    assert st.action is None and not st.q.any()
    st.q[4] = [0.0, 0.3, -0.2]  # what the device learned earlier about l* = 4
    assert client.begin(st, base, job) == 4  # greedy over 𝓗(3, ·) = 0: the first action, add
    assert st.action == 0 and st.meta["prev_slot"] == 3
    st.pending = (-math.inf, {"weights": {"weight": torch.tensor([[2.0], [0.0]])}, "version": 4, "index": 4})
    client._merge(st, torch.ones(1, 1), torch.zeros(1, dtype=torch.long))
    reward = st.meta["reward"]
    assert reward != 0.0
    assert st.q[3, 0] == pytest.approx(0.5 * (reward + 0.9 * 0.3 - 0.0))  # Eq. (8)
    assert st.q[3, 1:].tolist() == [0.0, 0.0] and st.q[4].tolist() == [0.0, 0.3, -0.2]


def test_local_epochs_time_their_parts_when_profiled():
    """Under ``raysfl.profiling`` one epoch with a pending fresh model shows its merge step, its other step,
    both minibatches and both optimizer steps (``benchmarks/profile_fl.py`` reads these sections)."""
    client = tiny_client(FedASMUParams(local_epochs=2))
    st = client.init_state(0, np.arange(4), np.random.SeedSequence(1))
    st.weights = {"weight": torch.tensor([[0.0], [1.0]])}
    st.job = {"version": 1, "lr": 0.1, "epoch_steps": 2, "boundaries": [0.0, 1.0, 2.0], "model_bytes": 8}
    st.meta = {"fresh_version": None, "slot": 1, "steps": 0}
    st.pending = (-math.inf, {"weights": {"weight": torch.tensor([[2.0], [0.0]])}, "version": 4, "index": 4})
    prof = profiling.enable("device")
    try:
        assert client._train(st, 1, 1) is None  # epoch 1 of 2: nothing to upload yet
    finally:
        profiling.disable()
    calls = {name: row[0] for name, row in prof.stats.items()}
    assert calls == {"client.data": 2, "client.merge": 1, "client.forward_backward": 1, "client.optimizer": 2}
    assert prof.batches["client.forward_backward"] == {1: 1}  # one pass of one sample
    assert st.meta["fresh_version"] == 4 and st.meta["steps"] == 2


def test_q_learning_and_slots():
    q = np.zeros((6, 3))
    q[4] = [0.5, 1.0, 0.0]
    assert q_update(q, 3, 0, 2.0, 4, 0.1, 0.9) == pytest.approx(0.1 * (2.0 + 0.9 * 1.0))
    assert [next_slot(5, 0, 2, 5), next_slot(2, 2, 2, 5), next_slot(3, 1, 2, 5)] == [5, 2, 3]
    assert FedASMUParams(local_epochs=5).slot_for("h1") == 2
    assert FedASMUParams(local_epochs=5).slot_for("h2") == 3
    assert FedASMUParams(local_epochs=5).slot_for("h3") == 4


def test_meta_policy_is_a_distribution_and_reinforce_moves_it():
    meta = MetaPolicy(hidden=8, lr=0.5, rho=0.1, seed=0)
    total = sum(math.exp(float(meta.net.log_prob(4, j).detach())) for j in range(4))
    assert total == pytest.approx(1.0, abs=1e-6)
    before = float(meta.net.log_prob(4, 1).detach())
    meta.reinforce(4, 1, 1.0)  # reward above the baseline 0: slot 1 becomes likelier
    assert float(meta.net.log_prob(4, 1).detach()) > before
    meta.observe(1.0)
    assert meta.baseline == pytest.approx(0.1)


def _timing_policy(*overrides: str) -> tuple[Any, Any, np.ndarray, np.ndarray]:
    """FedASMU's policy on 20 Dirichlet clients with ``overrides``: (policy, its scenario, |D_k|, f_k)."""
    from raysfl.engine.runner import prepare

    sc = fl_helpers.scenario_from_dict(
        BASE, ["data.partition=dirichlet", "federation.num_clients=20", *overrides]
    )
    prep = prepare(sc)
    policy = ALGORITHMS["fedasmu"].make_policy(prep.setup, prep.time_model, prep.profile, None)
    sizes = np.array([prep.setup.client_size(k) for k in range(20)])
    return policy, sc, sizes, prep.devices.flops_per_s


def test_per_device_training_time_charges_each_epoch_as_a_mean_size_pass():
    """§6.1.4: "the slowest device's training time is five times that of the fastest", whatever its data.

    Per sample an epoch over |D_k| takes |D_k|·W/f_k, so Dirichlet sizes widen the ratio beyond R; per device
    it is charged as a pass over mean-size data, mean|D|·W/f_k, and the ratio is R (pinned extremes).
    """
    ratios = {}
    for mode in ("per-sample", "per-device"):
        policy, _, sizes, rates = _timing_policy(
            "system.compute.pin_extremes=true",
            f"system.compute.training_time={mode}",
            "system.timing.flops_accounting=per-batch",
        )
        epoch = np.array([policy.epoch_times(k)[0] for k in range(20)])
        per_sample = sizes / rates * (policy.costs.forward_flops + policy.costs.backward_flops)
        expected = per_sample if mode == "per-sample" else per_sample * sizes.mean() / sizes
        np.testing.assert_allclose(epoch, expected, rtol=1e-12)
        ratios[mode] = epoch.max() / epoch.min()
    assert ratios["per-device"] == pytest.approx(5.0)
    assert ratios["per-sample"] > 5.5


def test_per_device_epochs_under_per_sample_flop_accounting_are_mean_size_passes_in_steps():
    """Per-sample FLOP accounting (the GAS code's clock) charges one sample's FLOPs a minibatch step, so a
    pass over D_k costs ⌈|D_k|/B⌉·W/f_k. Per device, an epoch must cost a mean-size pass, (mean|D|/B)·W/f_k,
    on every device: scaling by mean|D|/|D_k| (a ratio of samples, not steps) would leave it depending on
    |D_k|."""
    policy, sc, sizes, rates = _timing_policy(
        "system.compute.pin_extremes=true",
        "system.compute.training_time=per-device",
        "system.timing.flops_accounting=per-sample",
    )
    b = sc.train.batch_size
    assert len(set(np.ceil(sizes / b))) > 1  # the clients' step counts differ, so a wrong scale would show
    epoch = np.array([policy.epoch_times(k)[0] for k in range(20)])
    w = policy.costs.forward_flops + policy.costs.backward_flops
    np.testing.assert_allclose(epoch, sizes.mean() / b * w / rates, rtol=1e-12)
    assert epoch.max() / epoch.min() == pytest.approx(5.0)


def test_fixed_step_epochs_take_the_same_time_per_sample_and_per_device():
    """An epoch of ``epoch_steps`` minibatches does the same work on every device, so "per-device" must not
    scale it by mean|D| / |D_k|: that would make a small device's fixed-step job slower than a large one's
    on the same rate, as the baselines' fixed-step jobs are not (they run the same in either mode)."""
    times = {}
    for mode in ("per-sample", "per-device"):
        policy, _, sizes, rates = _timing_policy(
            f"system.compute.training_time={mode}",
            "system.timing.flops_accounting=per-batch",
            "algorithm.params.epoch_steps=3",
            "train.batch_size=1",  # every minibatch is one sample, whatever |D_k|
        )
        assert sizes.min() < sizes.mean() < sizes.max()  # the data sizes differ, so a scale would show
        times[mode] = np.array([policy.epoch_times(k) for k in range(20)])
    # 3 one-sample minibatches an epoch: 3·W/f_k on every device
    expected = 3 * (policy.costs.forward_flops + policy.costs.backward_flops) / rates
    np.testing.assert_allclose(times["per-device"][:, 0], expected, rtol=1e-12)
    np.testing.assert_array_equal(times["per-device"], times["per-sample"])


def test_per_device_training_time_is_refused_where_work_grows_with_the_data_otherwise():
    why = r"training_time: 'per-device' is not available for 'splitfed_v1'.*per_device_times = True"
    with pytest.raises(ConfigError, match=why):
        fl_helpers.scenario_from_dict(
            {**BASE, "algorithm": {"name": "splitfed_v1"}}, ["system.compute.training_time=per-device"]
        )
    for name in ("fedavg", "gas"):  # a fixed number of steps per job: times are per device already
        fl_helpers.scenario_from_dict(
            {**BASE, "algorithm": {"name": name}}, ["system.compute.training_time=per-device"]
        )


def test_split_training_needs_plain_sgd():
    with pytest.raises(ConfigError, match="momentum"):
        fl_helpers.scenario_from_dict(BASE, ["train.momentum=0.9"])


# --- the mid-training download sees the aggregations before its emulated time -------------------
def four_devices(tmp_path, link_bps, slot="h1", download="overlap"):
    """Overrides: K = m' = 4 devices started together with compute 1e10, 1e9, 2.5e9, 5e9 FLOP/s."""
    trace = tmp_path / "devices.csv"
    rates = (1e10, 1e9, 2.5e9, 5e9)
    trace.write_text(
        "client,flops_per_s,uplink_bps,downlink_bps\n"
        + "".join(f"{k},{f},1,1\n" for k, f in enumerate(rates))
    )
    return [
        "federation.num_clients=4",
        "federation.active_clients=4",
        "train.global_iterations=4",
        f"algorithm.params.request_slot='{slot}'",
        f"algorithm.params.fresh_download='{download}'",
        "algorithm.params.trigger_period=1000.0",
        "system.compute.kind='trace'",
        "system.link.kind='fixed'",
        f"system.link.uplink_bps={link_bps}",
        f"system.link.downlink_bps={link_bps}",
        f"system.trace_file='{trace}'",
    ]


def test_fresh_model_is_the_version_current_at_the_request(tmp_path, monkeypatch):
    """4 devices start at t = 0 (m' = K = 4), 3 epochs, request at l* = 2 (H1), free-ish links.

    Rates 1e10, 1e9, 2.5e9, 5e9 FLOP/s: with E the slow device's epoch time, uploads arrive at about
    0.3E (device 0), 0.6E (3), 1.2E (2) and 3E (1); requests at the start of epoch 2 come at E (device 1),
    0.4E (2) and 0.2E (3). So device 1 must get version 2 (devices 0 and 3 in, 2 out), device 2 version 1
    (0 in, 3 out) and device 3 nothing (no aggregation yet).
    """
    over = four_devices(tmp_path, 1e12)
    commits, metas, offers = {}, {}, {}
    orig_commit, orig_take = MUServer._commit, MUServer.on_client_model
    orig_epochs = MUClient.epochs

    def commit(self, weights):
        orig_commit(self, weights)
        commits[self.version] = {k: v.clone() for k, v in weights.items()}

    @functools.wraps(orig_take)  # policies call worker methods by name: a spy keeps the one it replaces
    def take(self, client, up, n):
        metas[client] = dict(up["meta"])
        return orig_take(self, client, up, n)

    @functools.wraps(orig_epochs)
    def epochs(self, state, first, last, offer):
        offers[state.client] = offer
        return orig_epochs(self, state, first, last, offer)

    monkeypatch.setattr(MUServer, "_commit", commit)
    monkeypatch.setattr(MUServer, "on_client_model", take)
    monkeypatch.setattr(MUClient, "epochs", epochs)
    _, events, _ = fl_helpers.run_scenario(BASE, tmp_path, over)
    arrivals = [e["client"] for e in events if e["kind"] == "model"]
    assert arrivals == [0, 3, 2, 1]
    assert metas[1]["fresh_version"] == 2 and metas[2]["fresh_version"] == 1
    assert metas[3]["fresh_version"] is None and offers[3] is None
    for k, v in ((1, 2), (2, 1)):
        assert offers[k]["version"] == v
        for key, value in offers[k]["weights"].items():  # the snapshot is the global model of that version
            assert torch.equal(value, commits[v][key])
    fresh_rows = [e for e in events if e["kind"] == "fresh"]
    assert sorted(e["client"] for e in fresh_rows) == [1, 2]


def test_blocking_download_delays_only_the_devices_that_download(tmp_path):
    """Blocking (H1): the rest of a training waits t_down = 8·|w|/R_dn when a newer model exists, else not."""
    over = four_devices(tmp_path, 1e9)
    _, ev_overlap, _ = fl_helpers.run_scenario(BASE, tmp_path, over, name="overlap")
    _, ev_block, _ = fl_helpers.run_scenario(
        BASE, tmp_path, four_devices(tmp_path, 1e9, download="blocking"), name="blocking"
    )
    t_down = 8 * ev_block[0]["bytes_down"] / 1e9
    arrive = [{e["client"]: e["t"] for e in ev if e["kind"] == "model"} for ev in (ev_overlap, ev_block)]
    assert arrive[1][1] - arrive[0][1] == pytest.approx(t_down)
    assert arrive[1][2] - arrive[0][2] == pytest.approx(t_down)
    assert arrive[1][3] == arrive[0][3] and arrive[1][0] == arrive[0][0]


def test_rl_slot_is_fetched_and_the_request_sees_its_time(tmp_path, monkeypatch):
    """RL slots: the device's l* is fetched when its training starts, so the policy times the request.

    Each fresh download is an event-log row at the request time with the model's bytes; the version the
    device merged is the number of aggregations before that time; a blocking download delays the rest of
    that device's training by t_down and nobody else's (the same slots are chosen in both runs).
    """
    metas, begun = {}, []
    orig_take, orig_begin = MUServer.on_client_model, MUClient.begin

    @functools.wraps(orig_take)
    def take(self, client, up, n):
        metas[client] = dict(up["meta"])
        return orig_take(self, client, up, n)

    @functools.wraps(orig_begin)
    def begin(self, state, base, job):
        begun.append(state.client)
        return orig_begin(self, state, base, job)

    monkeypatch.setattr(MUServer, "on_client_model", take)
    monkeypatch.setattr(MUClient, "begin", begin)
    runs = {}
    for download in ("overlap", "blocking"):
        metas.clear()
        begun.clear()
        over = [
            *four_devices(tmp_path, 1e9, slot="rl", download=download),
            "algorithm.params.local_epochs=6",
        ]
        _, events, _ = fl_helpers.run_scenario(BASE, tmp_path, over, name=download)
        assert sorted(begun) == [0, 1, 2, 3] and sorted(metas) == [0, 1, 2, 3]
        fresh = {e["client"]: e for e in events if e["kind"] == "fresh"}
        models = [e for e in events if e["kind"] == "model"]
        model_bytes = events[0]["bytes_down"]
        for k, meta in metas.items():
            assert (meta["fresh_version"] is not None) == (k in fresh)
            if k in fresh:
                assert meta["fresh_version"] == sum(1 for m in models if m["t"] < fresh[k]["t"])
                assert fresh[k]["bytes_down"] == model_bytes
        assert sum(e["bytes_down"] or 0 for e in events) == (4 + len(fresh)) * model_bytes
        runs[download] = (
            {k: m["slot"] for k, m in metas.items()},
            fresh,
            {m["client"]: m["t"] for m in models},
        )
    (slots_o, fresh_o, arrive_o), (slots_b, fresh_b, arrive_b) = runs["overlap"], runs["blocking"]
    assert slots_o == slots_b and set(fresh_o) == set(fresh_b) and len(fresh_b) >= 2
    t_down = 8 * model_bytes / 1e9
    for k in range(4):
        assert arrive_b[k] - arrive_o[k] == pytest.approx(t_down if k in fresh_b else 0.0, abs=1e-12)


# --- FedSSMU rounds -----------------------------------------------------------------------------
def test_fedssmu_round_bookkeeping(tmp_path):
    """Rounds of m' = 3 devices start together, end with their last upload; staleness in a round is k."""
    over = ["algorithm.name='fedssmu'", "train.global_iterations=3", "train.eval_every=1"]
    base = {**BASE, "algorithm": {"name": "fedssmu", "params": {"local_epochs": 2}}}
    summary, events, metrics = fl_helpers.run_scenario(base, tmp_path, over)
    starts = [e for e in events if e["kind"] == "start"]
    models = [e for e in events if e["kind"] == "model"]
    assert len(starts) == len(models) == 9
    round_starts = sorted({e["t"] for e in starts})
    assert len(round_starts) == 3 and round_starts[0] == 0.0
    for g in range(3):
        group = [e for e in starts if e["t"] == round_starts[g]]
        ups = models[3 * g : 3 * g + 3]
        assert len({e["client"] for e in group}) == 3
        assert sorted(e["client"] for e in ups) == sorted(e["client"] for e in group)
        assert [e["staleness"] for e in ups] == [0, 1, 2]  # s = k + 1
        if g < 2:
            assert round_starts[g + 1] == ups[-1]["t"]  # the next round starts with the last upload
    assert [m["iteration"] for m in metrics] == [0, 1, 2, 3]
    assert metrics[-1]["updates"] == 9 and summary["global_iterations"] == 3


# --- end to end ---------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", ["fedasmu", "fedssmu"])
def test_end_to_end_accuracy_above_chance(tmp_path, name):
    base = {**BASE, "algorithm": {**BASE["algorithm"], "name": name}}
    if name == "fedssmu":
        base["algorithm"] = {"name": name, "params": {"local_epochs": 3}}
        base["train"] = {**BASE["train"], "global_iterations": 10, "eval_every": 5}
    summary, events, metrics = fl_helpers.run_scenario(base, tmp_path)
    assert metrics[0]["accuracy"] <= 0.2
    assert summary["best_accuracy"] >= 0.6  # 10 classes: chance is 0.1


def test_literal_previous_version_runs_learns_and_resumes_identically(tmp_path):
    """On the engine, with 3 concurrent trainings: controls move, and a resumed run keeps the per-version
    records it needs (the checkpoint holds them) and ends as the uninterrupted one."""
    params = {**BASE["algorithm"]["params"], "control_record": "literal-prev-version", "eta_lambda": 0.01}
    doc = {**BASE, "algorithm": {"name": "fedasmu", "params": params}}
    doc["train"] = {**BASE["train"], "global_iterations": 6, "eval_every": 2}
    fl_helpers.resumes_identically(doc, tmp_path)
    metrics = pq.read_table(tmp_path / "full" / "metrics.parquet").to_pylist()
    assert metrics[-1]["mean_lambda"] != 1.0  # λ_0 = 1: learnt through other devices' aggregations
