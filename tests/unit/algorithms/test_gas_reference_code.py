"""GAS's reference-code options do what the public code does (issue 18; specs/gas.md §10.3-§10.6).

Each test works a short sequence by hand from the code's rules and checks raysfl against it:
the code's clock constants (``Client.model_process`` / ``transmit_activation`` / ``transmit_model``),
the all-labels gate on generation (``all_labels_have_stats``) and the ``weight_count`` counters.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from torch import nn

from raysfl.algorithms.actions import Call, Event, Log, Schedule
from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.common.costs import SplitCosts
from raysfl.algorithms.gas.policy import GASPolicy
from raysfl.algorithms.gas.server import GASServer
from raysfl.algorithms.gas.stats import weighted_moments
from raysfl.config import ConfigError
from raysfl.scenario import scenario_from_dict
from raysfl.system.config import TimingConfig
from raysfl.system.durations import TimeModel
from raysfl.system.table import DeviceTable

# The GAS code's constants (specs/gas.md §10.3): W_c per pass, bits per activation sample, model bits.
W_C, S_ACT, S_MODEL = 5_603_328, 131_072, 620_544
CODE_CLOCK = {
    "flops_accounting": "per-sample",
    "free_downloads": True,
    "client_pass_flops": W_C,
    "activation_bits": S_ACT,
    "client_model_bits": S_MODEL,
}
# Measured AlexNet L2 costs on 1×28×28 Fashion-MNIST (raysfl.models.flops; 2 FLOPs per multiply-add).
FMNIST_L2 = SplitCosts(
    client_forward_flops=7_676_928.0,
    client_backward_flops=14_902_272.0,
    server_forward_flops=99_706_880.0,
    server_backward_flops=199_413_760.0,
    server_input_grad_flops=99_706_880.0,
    server_weight_grad_flops=192_188_416.0,
    activation_bytes=12_544,
    client_model_bytes=75_264,
    full_model_bytes=15_472_680,
)


def _scenario(params=None, timing=None, server_flops_per_s=0.0, **train):
    return scenario_from_dict(
        {
            "data": {"dataset": "synthetic", "synthetic_classes": 3, "partition": "iid"},
            "model": {"name": "lenet5"},
            "federation": {"num_clients": 2, "active_clients": 1},
            "train": {"local_iterations": 2, "batch_size": 32, **train},
            "algorithm": {"name": "gas", "params": params or {}},
            "system": {"timing": timing or {}, "server_flops_per_s": server_flops_per_s},
        }
    )


# --- 1. the code's clock ------------------------------------------------------------------------------


def test_constant_charges_replace_the_measured_costs():
    """W_c for forward and backward alike; B·131,072 bits per activation upload, no labels; 620,544 bits."""
    code = FMNIST_L2.charged(TimingConfig(**CODE_CLOCK), batch_size=32)
    assert code.client_forward_flops == code.client_backward_flops == 5_603_328
    assert code.upload_bytes(32) == code.upload_bytes(24) == 32 * 131_072 // 8  # configured B, labels free
    assert code.gradient_bytes(24) == 32 * 131_072 // 8
    assert code.client_model_bytes == 620_544 // 8
    assert code.server_forward_flops == FMNIST_L2.server_forward_flops  # the server is not the code's
    # with no constant set nothing changes: the measured float32 activations + int64 labels of the batch
    assert FMNIST_L2.charged(TimingConfig(flops_accounting="per-sample"), 32) == FMNIST_L2
    assert FMNIST_L2.upload_bytes(24) == 24 * (12_544 + 8)


def test_gas_policy_runs_the_codes_clock():
    """One job of E = 2 on f = 5e9 FLOP/s, R = 4.194304e7 bit/s, by hand from the code's three methods.

    The client holds 40 samples, so its second batch has 8; the code still charges B = 32 (its
    ``minibatch`` attribute). Per-sample accounting of the *measured* FLOPs would instead charge
    7,676,928 / f forward and 14,902,272 / f backward, and 12,552 bytes per sample.
    """
    f, rate = 5e9, 4.194304e7
    sc = _scenario(timing=CODE_CLOCK)
    setup = RunSetup(sc, sc.params, (1, 28, 28), 3, (tuple(range(40)), tuple(range(40, 80))), np.ones((2, 3)))
    tm = TimeModel(DeviceTable(np.full(2, f), np.full(2, rate), np.full(2, rate)), sc.system.timing)
    policy = GASPolicy(setup, tm, FMNIST_L2, np.random.default_rng(0))
    compute = 5_603_328 / f  # model_process: one image's workload per pass
    upload = 32 * 131_072 / rate  # transmit_activation: 131,072 bits × minibatch
    model = 620_544 / rate  # transmit_model

    (act1,) = [a for a in policy.start() if isinstance(a, Schedule)]
    k = act1.client
    assert act1.t == pytest.approx(compute + upload, rel=1e-15)  # download free
    acts = policy.on_event(Event(act1.t, "act", k, act1.data))
    (act2,) = [a for a in acts if isinstance(a, Schedule)]
    assert act2.data["b"] == 8
    assert act2.t == pytest.approx(act1.t + compute + compute + upload, rel=1e-15)  # bwd, fwd, upload
    log = next(a.row for a in acts if isinstance(a, Log))
    assert log["bytes_up"] == 32 * 131_072 // 8
    acts = policy.on_event(Event(act2.t, "act", k, act2.data))
    (done,) = [a for a in acts if isinstance(a, Schedule)]
    assert done.kind == "model"
    assert done.t == pytest.approx(act2.t + compute + model, rel=1e-15)  # last backward, model upload
    assert done.t == pytest.approx(4 * 0.0011206656 + 2 * 0.1 + 620_544 / 4.194304e7, rel=1e-12)


def test_a_timed_server_charges_each_pass_what_it_computes():
    """With a server rate, G_k's pass costs forward + the backward to A alone, and the update on the
    buffer forward + the backward to the weights alone (measured: 99,706,880 and 192,188,416 FLOPs per
    sample of AlexNet L2 on Fashion-MNIST; the full backward, 199,413,760, was charged for both before)."""
    f, fs = 5e9, 1e12
    sc = _scenario(params={"q_s": 2}, server_flops_per_s=fs)
    setup = RunSetup(sc, sc.params, (1, 28, 28), 3, (tuple(range(40)), tuple(range(40, 80))), np.ones((2, 3)))
    tm = TimeModel.from_config(DeviceTable(np.full(2, f), np.full(2, 4e7), np.full(2, 4e7)), sc.system)
    policy = GASPolicy(setup, tm, FMNIST_L2, np.random.default_rng(0))
    (act1,) = [a for a in policy.start() if isinstance(a, Schedule)]
    acts = policy.on_event(Event(act1.t, "act", act1.client, act1.data))
    (serve1,) = [a for a in acts if isinstance(a, Call) and a.method == "on_activations"]
    assert serve1.pace_s == pytest.approx(32 * (99_706_880 + 99_706_880) / fs, rel=1e-15)
    (act2,) = [a for a in acts if isinstance(a, Schedule)]
    assert act2.data["b"] == 8
    acts = policy.on_event(Event(act2.t, "act", act2.client, act2.data))
    (serve2,) = [a for a in acts if isinstance(a, Call) and a.method == "on_activations"]
    update = (32 + 8) * (99_706_880 + 192_188_416) / fs  # the buffer's two batches: one server update
    assert serve2.pace_s == pytest.approx(8 * (99_706_880 + 99_706_880) / fs + update, rel=1e-15)


@pytest.mark.parametrize("server_update", ["before-gradient", "after-gradient"])
def test_g_k_leaves_the_timed_server_before_or_after_the_buffer_update(server_update):
    """Alg. 1 steps w_s on the full buffer and then computes G_k, so G_k waits for the update; the code
    computes G_k first and steps after, so G_k leaves after its own pass and the update only keeps the
    server busy. Q_s = 1: every arrival fills the buffer. One job of E = 2, by hand."""
    f, fs, rate = 5e9, 1e12, 4e7
    sc = _scenario(params={"q_s": 1, "server_update": server_update}, server_flops_per_s=fs)
    setup = RunSetup(sc, sc.params, (1, 28, 28), 3, (tuple(range(40)), tuple(range(40, 80))), np.ones((2, 3)))
    tm = TimeModel.from_config(DeviceTable(np.full(2, f), np.full(2, rate), np.full(2, rate)), sc.system)
    policy = GASPolicy(setup, tm, FMNIST_L2, np.random.default_rng(0))
    (act1,) = [a for a in policy.start() if isinstance(a, Schedule)]
    acts = policy.on_event(Event(act1.t, "act", act1.client, act1.data))
    gradient = 32 * 99_706_880 * 2 / fs  # forward + the backward to A
    update = 32 * (99_706_880 + 192_188_416) / fs  # forward + the backward to the weights, on the buffer
    (serve,) = [a for a in acts if isinstance(a, Call) and a.method == "on_activations"]
    assert serve.pace_s == pytest.approx(gradient + update, rel=1e-15)  # the server is busy for both
    waits = gradient + update if server_update == "before-gradient" else gradient
    back = 32 * 12_544 * 8 / rate + 32 * 14_902_272 / f  # G_k's float32 download, the client's backward
    forward = 8 * 7_676_928 / f + 8 * 12_552 * 8 / rate  # the next batch of 8: forward, upload A and Y
    (act2,) = [a for a in acts if isinstance(a, Schedule)]
    assert act2.t == pytest.approx(act1.t + waits + back + forward, rel=1e-12)
    (step,) = [a for a in acts if isinstance(a, Call) and a.method == "step"]
    assert step.pace_s == pytest.approx(act2.t - (act1.t + waits), rel=1e-12)
    assert policy.server_free_at == pytest.approx(act1.t + gradient + update, rel=1e-15)


def test_costs_checkpointed_before_the_one_gradient_counts_keep_their_charge():
    """Costs pickled by an older raysfl lack the one-gradient fields: a resumed run charges as before."""
    old = SplitCosts.__new__(SplitCosts)  # an instance with only the older fields, as then pickled
    old.__dict__.update({k: v for k, v in vars(FMNIST_L2).items() if not k.endswith("_grad_flops")})
    costs = pickle.loads(pickle.dumps(old))
    assert costs.gradient_pass_flops == costs.update_pass_flops == 99_706_880 + 199_413_760
    assert pickle.loads(pickle.dumps(FMNIST_L2)) == FMNIST_L2


def test_constant_charges_are_validated():
    """Whole bytes only, and only for gas: another method would silently ignore them."""
    with pytest.raises(ConfigError) as err:
        _scenario(timing={"activation_bits": 131_071})
    assert err.value.problems == [
        "system.timing: activation_bits = 131071 is not a whole number of bytes; use a multiple of 8 bits"
    ]
    with pytest.raises(ConfigError) as err:
        scenario_from_dict(
            {
                "algorithm": {"name": "fedbuff"},
                "model": {"name": "lenet5"},
                "data": {"dataset": "synthetic"},
                "system": {"timing": {"client_pass_flops": W_C}},
            }
        )
    assert (
        "system.timing.client_pass_flops: 5603328 is the GAS code's constant charge, read by algorithm "
        "'gas' only (not 'fedbuff'); use 0, the measured FLOPs and bytes"
    ) in err.value.problems


# --- server helpers -----------------------------------------------------------------------------------


def _server(params, batch_size=32):
    sc = _scenario(params={"covariance": "diagonal", **params}, batch_size=batch_size)
    setup = RunSetup(sc, sc.params, (1, 2, 2), 3, (range(4),) * 6, np.ones((6, 3)))
    torch.manual_seed(0)
    client, server = nn.Flatten(), nn.Sequential(nn.Flatten(), nn.Linear(4, 3))
    return GASServer(setup, client, server, torch.zeros(2, 1, 2, 2), torch.zeros(2, dtype=torch.long), seed=0)


def _batch(labels, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(len(labels), 1, 2, 2, generator=g), torch.tensor(labels)


# --- 2. generation waits for every label ---------------------------------------------------------------


@pytest.mark.parametrize("stats_update", ["per-flush", "per-activation"])
def test_all_labels_gate_generates_nothing_until_every_label_has_statistics(stats_update):
    """Top-up to B = 4 with Q_s = 2 batches of 2, M = 3 labels.

    Flush 1 holds labels (0, 1), (0, 0): n = (3, 1, 0) and label 2 has no statistics. ``any-label`` tops
    labels 0 and 1 up: (4−3) + (4−1) = 4 generated; the code's gate generates nothing. Flush 2 holds
    (2, 0), (1, 1): n = (1, 2, 1) and every label now has statistics: both generate 3 + 2 + 3 = 8.
    """
    generated = {}
    for gate in ("any-label", "all-labels"):
        srv = _server(
            {"q_s": 2, "generation": "top-up", "generation_gate": gate, "stats_update": stats_update},
            batch_size=4,
        )
        after = []
        for i, labels in enumerate([(0, 1), (0, 0), (2, 0), (1, 1)]):
            srv.on_activations(i % 2, _batch(labels, i), 0, 1 + i // 2)
            if i % 2:
                after.append(srv.generated_total)
        generated[gate] = after
    assert generated == {"any-label": [4, 4 + 8], "all-labels": [0, 8]}


def test_generation_gate_is_validated():
    """An unknown gate names the field and the allowed values."""
    with pytest.raises(ConfigError) as err:
        _scenario(params={"generation_gate": "some-labels"})
    assert err.value.problems == [
        "algorithm.params.generation_gate: 'some-labels' is not allowed; choose one of 'any-label', "
        "'all-labels'"
    ]


# --- 3. the code's progress counters --------------------------------------------------------------------


def test_code_progress_counters_by_hand():
    """``weight_count`` of GAS_main.py on a hand-worked sequence, Q_s = Q_c = 2, E = 2.

    The global count starts at 1; each aggregation adds the server updates so far (``local_epoch``); a
    client selected when the count is c tags its activations c, c+1, ...

        step  call                       count  server updates        tag
        1     act  client 0 (v0, e1)       1                            1
        2     act  client 1 (v0, e1)       1    flush → 1               1
        3     act  client 0 (v0, e2)       1                            2
        4     model client 0; client 2 selected at count 1 (v0)
        5     act  client 1 (v0, e2)       1    flush → 2               2
        6     model client 1: aggregation → 1 + 2 = 3; client 3 selected (v1)
        7     act  client 3 (v1, e1)       3                            3
        8     act  client 2 (v0, e1)       3    flush → 3               1  (count at its selection)
        9     act  client 3 (v1, e2)       3                            4
        10    act  client 2 (v0, e2)       3    flush → 4               2
        11    models 3, 2: aggregation → 3 + 4 = 7; client 4 selected (v2)
        12    act  client 4 (v2, e1)       7                            7

    The rule before issue 18 (count += 1 + updates, base read at the first activation) gave
    1, 1, 2, 2, 4, 4, 5, 5, 9.
    """
    srv = _server({"q_s": 2, "q_c": 2, "progress": "code", "generate": False})
    tags: list[float] = []
    store = srv._store

    def recording(acts, labels, weights):
        tags.append(float(weights[0]))
        store(acts, labels, weights)

    srv._store = recording
    weights = srv.client_weights()

    def act(client, version, e):
        srv.on_activations(client, _batch((0, 1), len(tags)), version, e)

    act(0, 0, 1)
    act(1, 0, 1)
    act(0, 0, 2)
    srv.on_client_model(0, weights, 4)
    act(1, 0, 2)
    srv.on_client_model(1, weights, 4)
    act(3, 1, 1)
    act(2, 0, 1)
    act(3, 1, 2)
    act(2, 0, 2)
    srv.on_client_model(3, weights, 4)
    srv.on_client_model(2, weights, 4)
    act(4, 2, 1)
    assert tags == [1, 1, 2, 2, 3, 1, 4, 2, 7]
    assert srv.server_updates == 4 and srv.aggregations == 2


# --- 4. the per-flush ridge ------------------------------------------------------------------------------


def test_per_flush_ridge_skips_a_labels_first_batch():
    """IncrementalStats.update: a label's first batch sets μ, Σ as they are; each later merge adds ridge·I.

    Q_s = 2, paper progress (weights s(n) = e). Flush 1: label 0 from batch 1 (weight 1), label 1 from
    batch 2 (weight 1): Σ_0, Σ_1 are the batches' own (biased) variances, no ridge. Flush 2: label 0 again
    (weight 2): Σ_0 = the weighted variance of all four label-0 activations + 0.5; Σ_1 is untouched.
    """
    srv = _server({"q_s": 2, "stats_update": "per-flush", "ridge": 0.5, "generation": "top-up"}, batch_size=2)
    b1, b2, b3, b4 = _batch((0, 0), 1), _batch((1, 1), 2), _batch((0, 0), 3), _batch((2, 2), 4)
    srv.on_activations(0, b1, 0, 1)
    srv.on_activations(1, b2, 0, 1)

    def flat(b):
        return b[0].reshape(2, -1).double()

    for y, b in ((0, b1), (1, b2)):
        _, cov = weighted_moments(flat(b), torch.ones(2, dtype=torch.float64))
        assert torch.allclose(srv.stats.cov[y], cov.diagonal(), atol=1e-12)
    srv.on_activations(0, b3, 0, 2)
    srv.on_activations(1, b4, 0, 2)
    x = torch.cat([flat(b1), flat(b3)])
    _, cov = weighted_moments(x, torch.tensor([1.0, 1.0, 2.0, 2.0], dtype=torch.float64))
    assert torch.allclose(srv.stats.cov[0], cov.diagonal() + 0.5, atol=1e-12)
    _, cov1 = weighted_moments(flat(b2), torch.ones(2, dtype=torch.float64))
    assert torch.allclose(srv.stats.cov[1], cov1.diagonal(), atol=1e-12)


@pytest.mark.parametrize(("aggregation", "expected"), [("data-size", 2.5), ("uniform", 4.0)])
def test_client_models_are_averaged_by_data_size_or_uniformly(aggregation, expected):
    """GAS eq. (10): w_c = Σ |D_k| w_k / Σ |D_k| [P]; the code's 1/Q_c [C]. Models 1 (|D| = 3) and 7 (|D| = 1)
    with Q_c = 2: (3·1 + 1·7) / 4 = 2.5 by data size, (1 + 7) / 2 = 4 uniformly. Every run of the suite has
    equal client sizes, where the two agree."""
    sc = _scenario(params={"covariance": "diagonal", "q_c": 2, "aggregation": aggregation})
    setup = RunSetup(sc, sc.params, (1, 2, 2), 3, (range(4),) * 6, np.ones((6, 3)))
    client, server = nn.Sequential(nn.Flatten(), nn.Linear(4, 4)), nn.Linear(4, 3)
    srv = GASServer(setup, client, server, torch.zeros(2, 1, 2, 2), torch.zeros(2, dtype=torch.long), seed=0)
    weights = {k: torch.full_like(v, 1.0) for k, v in srv.global_client.items()}
    assert set(weights) == {"1.weight", "1.bias"}
    srv.on_client_model(0, weights, num_samples=3)
    merged = srv.on_client_model(1, {k: torch.full_like(v, 7.0) for k, v in weights.items()}, num_samples=1)
    assert srv.aggregations == 1
    for tensor in merged.values():
        assert torch.allclose(tensor, torch.full_like(tensor, expected))
