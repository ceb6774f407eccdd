"""MiniBatch-SFL (specs/gas.md §10.2, §10.10): server step, barrier timing, batch rule, runs (no Ray)."""

import copy

import fl_helpers
import pytest
import torch
import torch.nn.functional as F

from raysfl.algorithms.config import TrainConfig
from raysfl.algorithms.minibatch_sfl.policy import proportional_batch
from raysfl.algorithms.minibatch_sfl.server import SyncSplitServer
from raysfl.config import ConfigError
from raysfl.engine import runner
from raysfl.models.config import ModelConfig
from raysfl.models.zoo import build_split_model
from raysfl.scenario import scenario_from_dict
from tests.conftest import data_root

DATA = data_root()

BASE = {
    "name": "tiny-mbsfl",
    "seed": 11,
    "data": {"dataset": "synthetic", "partition": "shard", "synthetic_train": 600, "synthetic_test": 200},
    "model": {"name": "lenet5"},
    "federation": {"num_clients": 10, "active_clients": 4},
    "train": {"global_iterations": 3, "local_iterations": 3, "batch_size": 16, "lr": 0.05},
    "algorithm": {"name": "minibatch_sfl"},
    "engine": {"server_threads": 1},
    "metrics": {"progress": False, "tensorboard": False},
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def run(tmp_path, base=BASE, overrides=(), name="run"):
    return fl_helpers.run_scenario(base, tmp_path, overrides, name)


# --- the server step -----
def _batches(gen, sizes, shape=(16, 5, 5)):
    return [(torch.randn(b, *shape, generator=gen), torch.randint(0, 10, (b,), generator=gen)) for b in sizes]


def test_server_step_equals_a_centralised_step_on_the_concatenated_batch():
    """Same weights, same data: G_k from the current w_s, then one SGD step on cat(A_1..A_C) (§10.10)."""
    model = build_split_model(ModelConfig(name="lenet5"), 1, 28, 10, seed=5)
    reference = copy.deepcopy(model.server)
    train = TrainConfig(lr=0.1, momentum=0.9, weight_decay=5e-4)
    server = SyncSplitServer(model, {"conv2": len(model.client)}, train, torch.zeros(0), torch.zeros(0))
    opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    gen = torch.Generator().manual_seed(0)
    for _ in range(2):  # the second iteration also checks that the momentum carries over
        batches = _batches(gen, (5, 8, 3))
        server.iteration((4, 1, 7), ("conv2",) * 3, ((0, 1, 2),), *batches)
        for k, (a, y) in zip((4, 1, 7), batches, strict=True):
            a = a.clone().requires_grad_(True)
            (expected,) = torch.autograd.grad(F.cross_entropy(reference(a), y), a)
            assert torch.allclose(server.gradient(k), expected, atol=1e-7)
        opt.zero_grad()
        F.cross_entropy(
            reference(torch.cat([a for a, _ in batches])), torch.cat([y for _, y in batches])
        ).backward()
        opt.step()
        got = dict(server.full.named_parameters())  # keys are layer names, as in the reference half
        for name, p in reference.named_parameters():
            assert torch.allclose(got[name], p, atol=1e-6), name
    assert server.pending == {}  # every G_k handed out once
    assert server.server_updates == 2


def test_aggregation_is_the_data_size_weighted_average_of_client_models():
    model = build_split_model(ModelConfig(name="lenet5"), 1, 28, 10, seed=5)
    server = SyncSplitServer(model, {"conv2": 6}, TrainConfig(), torch.zeros(0), torch.zeros(0))
    w = server.client_weights("conv2")
    assert set(w) == {"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias"}
    a = {k: torch.full_like(v, 1.0) for k, v in w.items()}
    b = {k: torch.full_like(v, 4.0) for k, v in w.items()}
    server.aggregate(("conv2", "conv2"), (100, 200), a, b)
    for v in server.client_weights("conv2").values():
        assert torch.allclose(v, torch.full_like(v, (100 * 1.0 + 200 * 4.0) / 300))


# --- batch sizes -----
def test_proportional_batch_by_hand():
    # |D| = 50, 30, 20 of 100 in the round, B = 10, C = 3: ⌊50·30/100⌋ = 15, ⌊30·30/100⌋ = 9, ⌊20·30/100⌋ = 6
    assert [proportional_batch(n, 100, 10, 3) for n in (50, 30, 20)] == [15, 9, 6]
    assert proportional_batch(1, 10_000, 4, 2) == 1  # never below one sample


# --- timing -----
DEVICES = [(2e8, 1e6, 4e6), (5e8, 4e6, 8e6), (1e9, 5e5, 2e6)]  # FLOP/s, uplink bit/s, downlink bit/s


def _trace(tmp_path):
    path = tmp_path / "devices.csv"
    rows = ["client,flops_per_s,uplink_bps,downlink_bps"]
    rows += [f"{k},{f},{u},{d}" for k, (f, u, d) in enumerate(DEVICES)]
    path.write_text("\n".join(rows) + "\n")
    return path


def _fixed(tmp_path, **algo):
    base = copy.deepcopy(BASE)
    base["data"].update({"partition": "iid", "synthetic_train": 96})  # 32 samples each: two batches of 16
    base["federation"] = {"num_clients": 3, "active_clients": 3}
    base["train"].update({"global_iterations": 2, "local_iterations": 2})
    base["system"] = {
        "compute": {"kind": "trace"},
        "link": {"kind": "trace"},
        "trace_file": str(_trace(tmp_path)),
    }
    base["algorithm"] = {"name": algo.pop("name", "minibatch_sfl"), "params": algo}
    return base


def test_barrier_timing_against_a_hand_computation(tmp_path):
    """§10.2: forward + upload, barrier at the max, server (free), gradient download + backward, ...,
    model upload; the round ends at the latest upload and the next starts there."""
    base = _fixed(tmp_path)
    prof = runner.prepare(scenario_from_dict(base)).profile
    b, act, model_bytes = 16, prof.activation_bytes, prof.client_model_bytes + prof.client_buffer_bytes
    expected = {}  # (kind, client or e, round) -> t
    t0 = 0.0
    for r in range(2):
        arrive = {}
        for k, (f, up, dn) in enumerate(DEVICES):
            arrive[k] = t0 + 8 * model_bytes / dn + b * prof.client_forward_flops / f + 8 * b * (act + 8) / up
        barrier1 = max(arrive.values())
        expected.update({("act", k, 1, r): t for k, t in arrive.items()})
        expected[("server", 1, r)] = barrier1
        for k, (f, up, dn) in enumerate(DEVICES):
            back = barrier1 + 8 * b * act / dn + b * prof.client_backward_flops / f
            arrive[k] = back + b * prof.client_forward_flops / f + 8 * b * (act + 8) / up
        barrier2 = max(arrive.values())
        expected.update({("act", k, 2, r): t for k, t in arrive.items()})
        expected[("server", 2, r)] = barrier2
        ends = {}
        for k, (f, up, dn) in enumerate(DEVICES):
            ends[k] = barrier2 + 8 * b * act / dn + b * prof.client_backward_flops / f + 8 * model_bytes / up
        expected.update({("model", k, r): t for k, t in ends.items()})
        t0 = max(ends.values())
    _, events, metrics = run(tmp_path, base)
    got = {}
    for e in events:
        if e["kind"] == "act":
            got[("act", e["client"], e["e"], e["version"])] = e["t"]
            barrier = expected[("server", e["e"], e["version"])]
            assert e["queue_s"] == pytest.approx(barrier - e["t"], abs=1e-12)  # the wait at the barrier
        elif e["kind"] == "server":
            got[("server", e["e"], e["version"])] = e["t"]
        elif e["kind"] == "model":
            got[("model", e["client"], e["version"])] = e["t"]
    assert got.keys() == expected.keys()
    for key, t in expected.items():
        assert got[key] == pytest.approx(t, rel=1e-12), key
    assert [m["t"] for m in metrics] == pytest.approx(
        [0.0, expected[("model", 2, 0)], t0]
    )  # client 2 is slowest


def test_proportional_rule_gives_each_client_its_share_of_b_times_c(tmp_path):
    base = copy.deepcopy(BASE)
    base["data"].update({"partition": "dirichlet", "alpha": 0.5})
    sc = scenario_from_dict(base, ['algorithm.params.batch_rule="proportional"'])
    prep = runner.prepare(sc)
    sizes = [len(ix) for ix in prep.setup.client_indices]
    per_sample = prep.profile.activation_bytes + 8
    _, events, _ = run(tmp_path, base, ['algorithm.params.batch_rule="proportional"'])
    rounds: dict[int, list[int]] = {}
    for e in events:
        if e["kind"] == "start":
            rounds.setdefault(e["version"], []).append(e["client"])
    seen = set()
    for e in events:
        if e["kind"] == "act" and e["e"] == 1:  # a fresh epoch each round: the first batch is the full b_k
            members = rounds[e["version"]]
            b = proportional_batch(sizes[e["client"]], sum(sizes[k] for k in members), 16, 4)
            assert e["bytes_up"] == b * per_sample
            seen.add(b)
    assert len(seen) > 1  # the rule had an effect (the code's bug: everyone B = 16)


# --- whole runs -----
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return run(tmp_path_factory.mktemp("mbsfl"))


def test_rounds_barriers_and_counts(tiny):
    summary, events, metrics = tiny
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    assert sum(e["kind"] == "server" for e in events) == 3 * 3  # T rounds × E iterations
    assert sum(e["kind"] == "act" for e in events) == 3 * 3 * 4  # × C clients
    assert sum(e["kind"] == "model" for e in events) == 3 * 4
    for v in range(3):  # every client of a round arrives once per iteration, before that iteration's barrier
        starts = [e["client"] for e in events if e["kind"] == "start" and e["version"] == v]
        assert len(set(starts)) == 4
        for it in (1, 2, 3):
            acts = [e for e in events if e["kind"] == "act" and e["version"] == v and e["e"] == it]
            (server,) = [e for e in events if e["kind"] == "server" and e["version"] == v and e["e"] == it]
            assert sorted(a["client"] for a in acts) == sorted(starts)
            assert max(a["t"] for a in acts) == server["t"]
    assert [m["iteration"] for m in metrics] == [0, 1, 2, 3]
    assert metrics[-1]["server_updates"] == 9 and metrics[-1]["aggregations"] == 3
    assert summary["stop_reason"] == "budget reached"


def test_same_seed_same_run_and_shared_momentum_option(tmp_path, tiny):
    _, events, metrics = tiny
    _, again_events, again = run(tmp_path, name="again")
    assert [m["loss"] for m in again] == [m["loss"] for m in metrics]
    assert [e["t"] for e in again_events] == [e["t"] for e in events]
    _, _, shared = run(tmp_path, overrides=['algorithm.params.optimizer_state="shared"'], name="shared")
    assert [m["loss"] for m in shared][1:] != [m["loss"] for m in metrics][1:]


def test_shared_momentum_needs_one_pool():
    with pytest.raises(ConfigError, match="optimizer_state"):
        scenario_from_dict(BASE, ['algorithm.params.optimizer_state="shared"', "engine.pools=2"])


@pytest.mark.skipif(
    not (DATA / "fashion-mnist").is_dir(), reason=f"real Fashion-MNIST not found under {DATA}"
)
def test_minibatch_sfl_learns_fashion_mnist(tmp_path):
    base = copy.deepcopy(BASE)
    base["data"] = {"dataset": "fashion-mnist", "data_dir": str(DATA), "partition": "iid"}
    base["federation"] = {"num_clients": 10, "active_clients": 5}
    base["train"] = {"global_iterations": 5, "local_iterations": 10, "batch_size": 32, "lr": 0.05}
    base["train"]["eval_every"] = 5
    base["metrics"]["events"] = False
    sc = scenario_from_dict(base)
    summary = runner.run(sc, tmp_path / "fm", backend="local")
    assert summary["synthetic_data"] is False
    assert summary["final_accuracy"] > 0.4, summary  # chance is 0.1; 250 local iterations of 5 clients


@pytest.mark.parametrize("accounting", ["per-batch", "per-sample"])
def test_server_time_of_a_barrier_counts_the_concatenated_step_once_per_sample(tmp_path, accounting):
    """Server time at a barrier: C gradient passes plus one step pass on the concatenation.

    Per batch Σ_k b·(F_G + F_step); per sample each pass is one image, so C·F_G + F_step: the step over the
    concatenation is one pass, not C (it was charged C·F_step before). Read off the run as the shift of the
    second iteration's arrivals when the server rate goes from free to f.
    """
    f = 1e9
    base = _fixed(tmp_path)
    base["system"]["timing"] = {"flops_accounting": accounting}
    prof = runner.prepare(scenario_from_dict(base)).profile
    grad = prof.server_forward_flops + prof.server_input_grad_flops
    step = prof.server_forward_flops + prof.server_weight_grad_flops
    c, b = len(DEVICES), 16
    expected = c * b * (grad + step) / f if accounting == "per-batch" else (c * grad + step) / f

    shift = fl_helpers.server_charge_at_first_barrier(base, tmp_path, f)
    assert shift.keys() == set(range(c))
    for k, s in shift.items():
        assert s == pytest.approx(expected, rel=1e-9), k
    assert expected > 0
