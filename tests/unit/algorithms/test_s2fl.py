"""S2FL (specs/gas.md §10.10): grouping search, median split choice, grouped and multi-cut server steps,
layer-wise aggregation, reductions to MiniBatch-SFL, runs (no Ray)."""

import copy

import fl_helpers
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from raysfl.algorithms.config import TrainConfig
from raysfl.algorithms.minibatch_sfl.layers import layerwise_average, split_layer_counts, split_profiles
from raysfl.algorithms.minibatch_sfl.server import SyncSplitServer
from raysfl.algorithms.s2fl import candidate_splits
from raysfl.algorithms.s2fl.grouping import balance_groups, group_distance, initial_groups, mean_distance
from raysfl.algorithms.s2fl.splitting import choose_splits, iteration_time
from raysfl.config import ConfigError
from raysfl.engine import runner
from raysfl.models.config import ModelConfig
from raysfl.models.zoo import build_split_model
from raysfl.scenario import scenario_from_dict
from tests.conftest import data_root

DATA = data_root()

BASE = {
    "name": "tiny-s2fl",
    "seed": 5,
    "data": {"dataset": "synthetic", "partition": "shard", "synthetic_train": 600, "synthetic_test": 200},
    "model": {"name": "lenet5"},
    "federation": {"num_clients": 10, "active_clients": 4},
    "train": {"global_iterations": 3, "local_iterations": 3, "batch_size": 16, "lr": 0.05},
    "algorithm": {"name": "s2fl"},
    "engine": {"server_threads": 1},
    "metrics": {"progress": False, "tensorboard": False},
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def run(tmp_path, base=BASE, overrides=(), name="run"):
    return fl_helpers.run_scenario(base, tmp_path, overrides, name)


# --- activation grouping -----
def test_grouping_finds_the_balanced_split_of_single_label_clients():
    # clients 0, 1 hold only label 0; clients 2, 3 only label 1: the initial [0, 1] | [2, 3] is the worst
    # split (each group one label, ‖(1, 0) − (½, ½)‖ = √½); swapping gives two perfectly uniform groups.
    hist = np.array([[10, 0], [10, 0], [0, 10], [0, 10]])
    assert mean_distance(hist, initial_groups(4, 2)) == pytest.approx(np.sqrt(0.5))
    groups = balance_groups(hist, 2)
    assert mean_distance(hist, groups) == pytest.approx(0.0)
    assert sorted(len(g) for g in groups) == [2, 2]


def test_grouping_improves_balance_is_deterministic_and_keeps_a_partition():
    rng = np.random.default_rng(0)
    hist = np.zeros((10, 10), dtype=int)
    for k in range(10):  # shard-like: two labels per client, sorted so consecutive clients share labels
        hist[k, [k // 2 * 2 % 10, (k // 2 * 2 + 1) % 10]] = rng.integers(50, 300, size=2)
    start = mean_distance(hist, initial_groups(10, 2))
    groups = balance_groups(hist, 2, sweeps=100)
    assert mean_distance(hist, groups) < start - 0.1
    assert balance_groups(hist, 2, sweeps=100) == groups
    assert sorted(i for g in groups for i in g) == list(range(10)) and [len(g) for g in groups] == [5, 5]
    assert balance_groups(hist, 2, sweeps=0) == initial_groups(10, 2)  # no sweep, no change
    assert group_distance(hist, list(range(10))) <= max(group_distance(hist, g) for g in groups)


def test_initial_groups_keep_every_client():
    assert initial_groups(5, 2) == [[0, 1, 2], [3, 4]]
    assert initial_groups(2, 5) == [[0], [1]]


# --- adaptive model splitting -----
def test_split_choice_against_a_hand_computed_median():
    times = np.array([[1.0, 4.0], [2.0, 8.0], [3.0, 5.0]])
    # all six times sorted: 1 2 3 4 5 8 -> median (3 + 4)/2 = 3.5
    # client 0: |1-3.5| = 2.5, |4-3.5| = 0.5 -> candidate 1 (4.0)
    # client 1: 1.5, 4.5 -> candidate 0 (2.0);  client 2: 0.5, 1.5 -> candidate 0 (3.0)
    choice = choose_splits(times)
    assert choice.tolist() == [1, 0, 0]
    assert iteration_time(times, choice) == 4.0
    # one candidate: every client takes it, whatever the median (here 6 of {2, 6, 7})
    assert choose_splits(np.array([[2.0], [6.0], [7.0]])).tolist() == [0, 0, 0]
    # a tie goes to the first (shallower) candidate: median of {1, 3} is 2, both 1 away
    assert choose_splits(np.array([[1.0, 3.0]])).tolist() == [0]


# --- the server with groups and several cuts -----
def _lenet():
    return build_split_model(ModelConfig(name="lenet5"), 1, 28, 10, seed=5)


def _acts(gen, sizes, shape=(16, 5, 5)):
    return [(torch.randn(b, *shape, generator=gen), torch.randint(0, 10, (b,), generator=gen)) for b in sizes]


def _server(train, group_momentum="averaged", cuts=None):
    model = _lenet()
    return SyncSplitServer(
        model, cuts or {"conv2": 6}, train, torch.zeros(0), torch.zeros(0), group_momentum=group_momentum
    )


def test_equal_groups_with_averaged_sgd_state_equal_one_concatenated_step():
    """With SGD the average of per-group steps from the same (w, momentum) is one step on the mean of the
    group-mean gradients; with equal group sizes that is the mean over all samples (MiniBatch-SFL)."""
    train = TrainConfig(lr=0.1, momentum=0.9, weight_decay=5e-4)
    one, two = _server(train), _server(train)
    gen = torch.Generator().manual_seed(1)
    for _ in range(3):
        batches = _acts(gen, (6, 6, 6, 6))
        one.iteration((0, 1, 2, 3), ("conv2",) * 4, ((0, 1, 2, 3),), *batches)
        two.iteration((0, 1, 2, 3), ("conv2",) * 4, ((0, 2), (1, 3)), *batches)
        for k in range(4):
            # G_k is computed before any group steps: the grouping only changes it through w_s
            assert torch.allclose(one.gradient(k), two.gradient(k), atol=1e-7)
    for (name, p), (_, q) in zip(one.full.named_parameters(), two.full.named_parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-6), name


def test_sequential_group_momentum_is_the_code_behaviour_and_differs_only_with_momentum():
    gen = torch.Generator().manual_seed(2)
    batches = _acts(gen, (5, 7, 4))
    groups = ((0,), (1, 2))
    for momentum, same in ((0.0, True), (0.9, False)):
        train = TrainConfig(lr=0.1, momentum=momentum, weight_decay=0.0)
        avg, seq = _server(train, "averaged"), _server(train, "sequential")
        avg.iteration((0, 1, 2), ("conv2",) * 3, groups, *batches)
        seq.iteration((0, 1, 2), ("conv2",) * 3, groups, *batches)
        close = all(
            torch.allclose(p, q, atol=1e-7)
            for p, q in zip(avg.full.parameters(), seq.full.parameters(), strict=True)
        )
        assert close is same


def test_mixed_cuts_server_step_runs_the_shallow_clients_through_the_middle_layers():
    """Client 0 cut after conv1 (3 layers), client 1 after conv2 (6): the server runs layers 3..5 for client
    0 only, concatenates at layer 6 and steps every layer it ran (conv2 from client 0's samples alone)."""
    model = _lenet()
    reference = copy.deepcopy(model)
    ref = torch.nn.Sequential(*reference.client, *reference.server)
    train = TrainConfig(lr=0.1, momentum=0.9, weight_decay=5e-4)
    server = SyncSplitServer(model, {"conv1": 3, "conv2": 6}, train, torch.zeros(0), torch.zeros(0))
    gen = torch.Generator().manual_seed(3)
    (a0, y0), (a1, y1) = _acts(gen, (5,), (6, 14, 14))[0], _acts(gen, (7,))[0]
    server.iteration((8, 9), ("conv1", "conv2"), ((0, 1),), (a0, y0), (a1, y1))
    for k, cut, a, y in ((8, 3, a0, y0), (9, 6, a1, y1)):
        x = a.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(F.cross_entropy(ref[cut:](x), y), x)
        assert torch.allclose(server.gradient(k), g, atol=1e-6)
    opt = torch.optim.SGD(ref[3:].parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    F.cross_entropy(ref[6:](torch.cat([ref[3:6](a0), a1])), torch.cat([y0, y1])).backward()
    opt.step()
    for (name, p), q in zip(server.full.named_parameters(), ref.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-6), name
    # layers below the shallowest cut (conv1) belong to the clients: the server never changed them
    assert torch.equal(server.full.conv1.weight, reference.client.conv1.weight)


def test_layerwise_average_by_hand():
    index = {"a": 0, "b": 1, "c": 2}
    server_state = {"a.w": torch.tensor([0.0]), "b.w": torch.tensor([2.0]), "c.w": torch.tensor([7.0])}
    clients = [{"a.w": torch.tensor([1.0])}, {"a.w": torch.tensor([5.0]), "b.w": torch.tensor([10.0])}]
    out = layerwise_average(index, server_state, clients, cuts=[1, 2], sizes=[1, 3])
    # layer a: both clients hold it: (1·1 + 3·5)/4 = 4
    # layer b: client 1 (|D| = 3) trained it, the server trained it for client 0 (|D| = 1): (3·10 + 1·2)/4 = 8
    # layer c: above every cut, server only, not aggregated
    assert out == {"a.w": torch.tensor([4.0]), "b.w": torch.tensor([8.0])}


# --- candidates and validation -----
def test_default_candidates_are_the_splits_up_to_the_scenarios():
    sc = scenario_from_dict(BASE)
    assert candidate_splits(sc, sc.params) == ["conv1", "conv2"]
    sc = scenario_from_dict(BASE, ['model.name="alexnet"'])
    assert candidate_splits(sc, sc.params) == ["L1", "L2"]  # the code's two candidates (§10.10)
    setup = runner.prepare(scenario_from_dict(BASE)).setup
    assert split_layer_counts(setup, ["conv1", "conv2"]) == {"conv1": 3, "conv2": 6}


def test_validation_names_bad_candidates_and_too_many_groups():
    with pytest.raises(ConfigError) as err:
        scenario_from_dict(BASE, ['algorithm.params.candidates=["conv1", "L9"]', "algorithm.params.groups=5"])
    text = str(err.value)
    assert "algorithm.params.candidates: 'L9'" in text and "algorithm.params.groups: 5" in text


# --- reductions to MiniBatch-SFL -------------------------------------------------------------------------
def _as(base, name, **params):
    out = copy.deepcopy(base)
    out["algorithm"] = {"name": name, "params": params}
    return out


def test_one_candidate_and_one_group_is_minibatch_sfl_exactly(tmp_path):
    _, ev_s, m_s = run(tmp_path, _as(BASE, "s2fl", candidates=["conv2"], groups=1), name="s2fl")
    _, ev_m, m_m = run(tmp_path, _as(BASE, "minibatch_sfl"), name="mbsfl")
    assert [m["loss"] for m in m_s] == [m["loss"] for m in m_m]
    assert [m["t"] for m in m_s] == [m["t"] for m in m_m]
    assert [(e["t"], e["kind"], e["client"]) for e in ev_s] == [
        (e["t"], e["kind"], e["client"]) for e in ev_m
    ]
    assert all(m["client_layers"] == 6 for m in m_s[1:])
    # the code's S2FL (splitting in the time model only) trains exactly as MiniBatch-SFL, on another clock
    _, ev_c, m_c = run(tmp_path, _as(BASE, "s2fl", split_mode="code", groups=1), name="code")
    assert [m["loss"] for m in m_c] == [m["loss"] for m in m_m]
    assert [m["t"] for m in m_c] != [m["t"] for m in m_m]
    assert any(m["client_layers"] < 6 for m in m_c[1:])  # some clients were timed at conv1


def test_training_at_a_shallower_cut_is_the_same_sgd_for_one_client(tmp_path):
    """Split invariance of the trained mode: with one client per round and stateless SGD (no momentum), a
    client cut at conv1 whose conv2 the server trains gives the same full model as a client holding conv2:
    the chain rule is the same, only who applies the update differs."""
    base = copy.deepcopy(BASE)
    base["federation"] = {"num_clients": 5, "active_clients": 1}
    base["train"].update({"momentum": 0.0, "global_iterations": 3})
    _, ev_s, m_s = run(tmp_path, _as(base, "s2fl", candidates=["conv1"], groups=1), name="shallow")
    _, ev_m, m_m = run(tmp_path, _as(base, "minibatch_sfl"), name="deep")
    assert [m["loss"] for m in m_s] == pytest.approx([m["loss"] for m in m_m], rel=1e-5)
    assert [m["accuracy"] for m in m_s] == [m["accuracy"] for m in m_m]
    up_s = [e["bytes_up"] for e in ev_s if e["kind"] == "act"]
    up_m = [e["bytes_up"] for e in ev_m if e["kind"] == "act"]
    assert up_s[0] == 16 * (6 * 14 * 14 * 4 + 8) and up_m[0] == 16 * (16 * 5 * 5 * 4 + 8)  # conv1 vs conv2


# --- the split choice in a run -----
DEVICES = [(1e8, 1e8, 1e8), (1e10, 1e6, 1e6), (3e8, 5e6, 5e6), (5e9, 2e6, 4e6)]  # FLOP/s, up, down bit/s


def test_run_trains_and_times_each_client_at_its_median_choice(tmp_path):
    trace = tmp_path / "devices.csv"
    trace.write_text(
        "client,flops_per_s,uplink_bps,downlink_bps\n"
        + "".join(f"{k},{f},{u},{d}\n" for k, (f, u, d) in enumerate(DEVICES))
    )
    base = copy.deepcopy(BASE)
    base["data"].update({"partition": "iid", "synthetic_train": 128})  # 32 samples each, batches of 16
    base["federation"] = {"num_clients": 4, "active_clients": 4}
    base["train"].update({"global_iterations": 1, "local_iterations": 2})
    base["system"] = {"compute": {"kind": "trace"}, "link": {"kind": "trace"}, "trace_file": str(trace)}
    setup = runner.prepare(scenario_from_dict(base)).setup
    profiles = split_profiles(setup, ["conv1", "conv2"])
    b, times = 16, np.zeros((4, 2))
    for k, (f, up, dn) in enumerate(DEVICES):
        for j, p in enumerate(profiles.values()):
            compute = b * (p.client_forward_flops + p.client_backward_flops) / f
            times[k, j] = compute + 8 * b * (p.activation_bytes + 8) / up + 8 * b * p.activation_bytes / dn
    med = np.median(times)
    choice = [int(np.argmin(np.abs(row - med))) for row in times]
    assert sorted(set(choice)) == [0, 1]  # both candidates are used by these devices
    _, events, metrics = run(tmp_path, base)
    chosen = [list(profiles.values())[j] for j in choice]
    for e in events:
        if e["kind"] == "act":
            assert e["bytes_up"] == b * (chosen[e["client"]].activation_bytes + 8)
        if e["kind"] in ("start", "model"):
            p = chosen[e["client"]]
            assert (e["bytes_down"] if e["kind"] == "start" else e["bytes_up"]) == p.client_model_bytes
    assert metrics[-1]["client_layers"] == pytest.approx(np.mean([(3, 6)[j] for j in choice]))


@pytest.mark.skipif(
    not (DATA / "fashion-mnist").is_dir(), reason=f"real Fashion-MNIST not found under {DATA}"
)
def test_s2fl_learns_fashion_mnist(tmp_path):
    base = copy.deepcopy(BASE)
    base["data"] = {"dataset": "fashion-mnist", "data_dir": str(DATA), "partition": "iid"}
    base["federation"] = {"num_clients": 10, "active_clients": 5}
    base["train"] = {"global_iterations": 5, "local_iterations": 10, "batch_size": 32, "lr": 0.05}
    base["train"]["eval_every"] = 5
    base["metrics"]["events"] = False
    summary = runner.run(scenario_from_dict(base), tmp_path / "fm", backend="local")
    assert summary["synthetic_data"] is False
    assert summary["final_accuracy"] > 0.4, summary  # chance is 0.1


@pytest.mark.parametrize("groups", [1, 2])
def test_per_sample_server_time_charges_one_step_pass_per_group_at_its_shallowest_cut(tmp_path, groups):
    """Per sample, a barrier costs Σ_k F_G(split_k) + Σ_groups max_{k∈g} F_step(split_k): one step pass per
    group, charged at the split with the most server layers (``SyncSplitPolicy.server_busy_s``)."""
    f = 1e9
    trace = tmp_path / "devices.csv"
    trace.write_text(
        "client,flops_per_s,uplink_bps,downlink_bps\n"
        + "".join(f"{k},{fl},{u},{d}\n" for k, (fl, u, d) in enumerate(DEVICES))
    )
    base = copy.deepcopy(BASE)
    base["data"].update({"partition": "iid", "synthetic_train": 128})
    base["federation"] = {"num_clients": 4, "active_clients": 4}
    base["train"].update({"global_iterations": 1, "local_iterations": 2})
    base["system"] = {
        "compute": {"kind": "trace"},
        "link": {"kind": "trace"},
        "trace_file": str(trace),
        "timing": {"flops_accounting": "per-sample"},
    }
    base = _as(base, "s2fl", groups=groups)
    setup = runner.prepare(scenario_from_dict(base)).setup
    profiles = list(split_profiles(setup, ["conv1", "conv2"]).values())
    b, times = 16, np.zeros((4, 2))
    for k, (fl, up, dn) in enumerate(DEVICES):  # per sample: one image's FLOPs per pass, the batch's bytes
        for j, p in enumerate(profiles):
            compute = (p.client_forward_flops + p.client_backward_flops) / fl
            times[k, j] = compute + 8 * b * (p.activation_bytes + 8) / up + 8 * b * p.activation_bytes / dn
    choice = [profiles[int(np.argmin(np.abs(row - np.median(times))))] for row in times]
    assert len({id(p) for p in choice}) == 2  # both cuts are in the round
    parts = balance_groups(np.asarray(setup.label_hist)[[0, 1, 2, 3]], groups)
    grad = sum(p.server_forward_flops + p.server_input_grad_flops for p in choice)
    step_pass = [p.server_forward_flops + p.server_weight_grad_flops for p in choice]
    step = sum(max(step_pass[i] for i in g) for g in parts)
    expected = (grad + step) / f

    shift = fl_helpers.server_charge_at_first_barrier(base, tmp_path, f)
    assert shift.keys() == set(range(4))
    for k, s in shift.items():
        assert s == pytest.approx(expected, rel=1e-9), k
