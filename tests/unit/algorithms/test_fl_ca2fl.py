"""CA2FL on the engine (no Ray): cached update calibration and the caches by hand, the code's variant."""

import fl_helpers
import pytest
import torch
from fl_helpers import DATA, KEY, wt

from raysfl.algorithms.actions import CLIENT, SERVER, Call, Event, Log, Schedule

BASE = {
    "name": "tiny-ca2fl",
    "seed": 5,
    "data": {"dataset": "synthetic", "partition": "shard", "synthetic_train": 600, "synthetic_test": 200},
    "model": {"name": "lenet5"},
    "federation": {"num_clients": 10, "active_clients": 4},
    "train": {"global_iterations": 5, "local_iterations": 2, "batch_size": 16},
    "algorithm": {"name": "ca2fl", "params": {"buffer_size": 3}},
    "metrics": {"progress": False, "tensorboard": False},
}


def tiny_server(name, params=None, sizes=(1, 2, 1), active=2, start=(1.0, 2.0)):
    return fl_helpers.tiny_server(name, params, sizes, active, start)


def run(tmp_path, overrides=(), base=BASE, name="run"):
    return fl_helpers.run_scenario(base, tmp_path, overrides, name)


def cache(server):
    return {k: v[KEY].flatten().tolist() for k, v in sorted(server.cache.items())}


def _sequence(server):
    """N = 3, M = 2, w = [1, 2]: 0 (Δ [2, 0]) and 1 (Δ [0, 4]) flush; 0 restarts; 2 (stale, Δ [4, 0]) and
    0 (Δ [0, 8]) flush."""
    for k in (0, 1, 2):
        server.send_model(k)
    server.on_client_model(0, wt(3.0, 2.0), 1)
    server.on_client_model(1, wt(1.0, 6.0), 2)
    first = server.global_model()[KEY].clone()
    assert cache(server) == {0: [2.0, 0.0], 1: [0.0, 4.0]}
    server.send_model(0)
    server.on_client_model(2, wt(5.0, 2.0), 1)
    server.on_client_model(0, {KEY: first + wt(0.0, 8.0)[KEY]}, 1)
    return first


def test_cached_update_calibration_by_hand():
    """v_t = h̄_t + (1/M)·Σ_{i∈S_t}(Δ_i − h_i^t); w ← w + η·v_t; h_i ← Δ_i; h̄ over all N = 3 clients."""
    server = tiny_server("ca2fl", {"buffer_size": 2})
    first = _sequence(server)
    # flush 1: h̄ = 0, v = ([2, 0] + [0, 4]) / 2 = [1, 2] → w = [2, 4]; h̄ = [2/3, 4/3]
    assert torch.equal(first, wt(2.0, 4.0)[KEY])
    # flush 2: Σ(Δ − h_old) = ([4, 0] − 0) + ([0, 8] − [2, 0]) = [2, 8]; v = [2/3, 4/3] + [1, 4]
    assert torch.allclose(server.global_model()[KEY], wt(2 + 5 / 3, 4 + 16 / 3)[KEY])
    assert cache(server) == {0: [0.0, 8.0], 1: [0.0, 4.0], 2: [4.0, 0.0]}
    h_mean = server.h_mean[KEY].flatten().tolist()
    assert h_mean == pytest.approx([4 / 3, 4.0]) and server.mean_cache()[
        KEY
    ].flatten().tolist() == pytest.approx(h_mean)
    ev = server.evaluate()
    assert ev["updates"] == 2 and ev["cached_clients"] == 3 and ev["max_staleness"] == 1


def test_global_learning_rate_scales_v():
    server = tiny_server("ca2fl", {"buffer_size": 2, "server_lr": 0.5})
    assert torch.equal(_sequence(server), wt(1.5, 3.0)[KEY])  # [1, 2] + 0.5·[1, 2]


def test_a_client_reporting_twice_in_one_buffer_telescopes():
    """Client 0 reports Δ = [2, 0], then (same base, no flush yet) Δ = [0, 4]: Σ(Δ − h_old) = [0, 4]."""
    server = tiny_server("ca2fl", {"buffer_size": 2})
    server.send_model(0)
    server.on_client_model(0, wt(3.0, 2.0), 1)
    server.send_model(0)
    server.on_client_model(0, wt(1.0, 6.0), 1)
    assert torch.equal(server.global_model()[KEY], wt(1.0, 4.0)[KEY])  # [1, 2] + [0, 4] / 2
    assert cache(server) == {0: [0.0, 4.0]}
    assert server.h_mean[KEY].flatten().tolist() == pytest.approx([0.0, 4 / 3])


def test_code_mode_sums_all_caches_weighted_by_data_size():
    """GAS code: w ← w + Σ_{i=1..N} |D_i|/Σ|D|·h_i with |D| = (1, 2, 1)."""
    server = tiny_server("ca2fl", {"buffer_size": 2, "mode": "code"})
    first = _sequence(server)
    assert torch.equal(first, wt(1.5, 4.0)[KEY])  # [1, 2] + ¼·[2, 0] + ½·[0, 4]
    # [1.5, 4] + ¼·[0, 8] + ½·[0, 4] + ¼·[4, 0]: the stale cache of client 1 counts again
    assert torch.equal(server.global_model()[KEY], wt(2.5, 8.0)[KEY])
    assert cache(server) == {0: [0.0, 8.0], 1: [0.0, 4.0], 2: [4.0, 0.0]}


def test_first_flush_equals_fedbuff():
    """With every cache empty, v = (1/M)·ΣΔ: CA2FL's first step is FedBuff's."""
    servers = [tiny_server(name, {"buffer_size": 2}) for name in ("ca2fl", "fedbuff")]
    for s in servers:
        s.send_model(0)
        s.send_model(2)
        s.on_client_model(2, wt(0.5, -1.0), 1)
        s.on_client_model(0, wt(3.0, 7.0), 1)
    assert torch.equal(servers[0].global_model()[KEY], servers[1].global_model()[KEY])


# --- the run --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ca2fl_run(tmp_path_factory):
    return run(tmp_path_factory.mktemp("ca2fl"))


def test_run_flushes_every_m_and_caches_every_reporting_client(ca2fl_run):
    summary, events, metrics = ca2fl_run
    models = [e for e in events if e["kind"] == "model"]
    assert len(models) == 5 * 3 and [e["server_update"] for e in models] == [None, None, 1] * 5
    assert metrics[-1]["cached_clients"] == len({e["client"] for e in models})
    assert metrics[-1]["updates"] == 5 and summary["stop_reason"] == "budget reached"


def test_code_mode_changes_the_run(tmp_path, ca2fl_run):
    _, _, metrics = ca2fl_run
    _, _, code = run(tmp_path, ['algorithm.params.mode="code"'], name="code")
    assert [m["t"] for m in code] == [m["t"] for m in metrics]  # same timing and clients
    assert [m["loss"] for m in code][1:] != [m["loss"] for m in metrics][1:]


def test_ca2fl_learns_fashion_mnist(tmp_path):
    if not (DATA / "fashion-mnist").is_dir():
        pytest.skip(f"real Fashion-MNIST not found at {DATA / 'fashion-mnist'}; quick accuracy check skipped")
    base = {
        "name": "ca2fl-fmnist",
        "seed": 1,
        "data": {"dataset": "fashion-mnist", "data_dir": str(DATA), "partition": "iid"},
        "model": {"name": "lenet5"},
        "federation": {"num_clients": 10, "active_clients": 4},
        "train": {"global_iterations": 5, "local_iterations": 20, "lr": 0.05, "eval_every": 5},
        "algorithm": {"name": "ca2fl", "params": {"buffer_size": 4}},
        "metrics": {"progress": False, "tensorboard": False, "events": False},
    }
    summary, _, metrics = run(tmp_path, base=base)
    assert [m["iteration"] for m in metrics] == [0, 5]
    assert metrics[0]["accuracy"] < 0.2 and summary["final_accuracy"] > 0.5, metrics


# --- the GAS code's aliased slots (job_base = "aliased", GAS spec §10.10 [C]) -----------------------------
def ca2fl_policy(params):
    return fl_helpers.fl_policy("ca2fl", params, num_clients=6, active=2, local_iterations=2, seed=3)


def calls(actions):
    return [(a.target, a.method, a.client) for a in actions if isinstance(a, Call)]


def test_aliased_jobs_take_the_global_model_when_due():
    """The C jobs of time 0 train on their copy of w_0 at once; a refilled job takes the model and trains
    when it is due (send_model, then train, then the arrival), and its arrival has staleness 0."""
    policy = ca2fl_policy({"buffer_size": 1, "mode": "code", "job_base": "aliased"})
    start = policy.start()
    first = sorted(policy.active)
    assert [c for c in calls(start) if c[1] != "evaluate"] == [
        *((SERVER, "send_model", -1) for _ in first),
        *((CLIENT, "train", k) for k in first),
    ]
    k0 = first[0]
    arrival = policy.on_event(Event(3.0, "model", k0))  # 1 + 2·0.5 + 1 s
    assert calls(arrival)[0] == (SERVER, "on_client_model", -1) and policy.version == 1
    refill = policy.on_event(Event(3.0, "refill"))
    (k1,) = set(policy.active) - set(first)
    assert calls(refill) == [] and policy.active[k1].aliased and policy.active[k1].version == 1
    (due,) = [a for a in refill if isinstance(a, Schedule)]
    assert (due.t, due.kind, due.client) == (6.0, "model", k1)
    policy.on_event(Event(3.0, "model", first[1]))  # the other first job: version 2 before k1 is due
    later = policy.on_event(Event(6.0, "model", k1))
    assert calls(later)[:3] == [
        (SERVER, "send_model", -1),
        (CLIENT, "train", k1),
        (SERVER, "on_client_model", -1),
    ]
    (row,) = [a.row for a in later if isinstance(a, Log) and a.row["kind"] == "model"]
    assert row["staleness"] == 0 and row["version"] == 2


def test_sent_jobs_keep_the_model_of_their_start():
    policy = ca2fl_policy({"buffer_size": 1, "mode": "code"})
    policy.start()
    first = sorted(policy.active)
    policy.on_event(Event(3.0, "model", first[0]))
    refill = policy.on_event(Event(3.0, "refill"))
    (k1,) = set(policy.active) - set(first)
    assert calls(refill) == [(SERVER, "send_model", -1), (CLIENT, "train", k1)]
    assert not policy.active[k1].aliased


def test_aliased_equals_sent_when_one_job_runs_at_a_time(tmp_path):
    """C = 1: no update happens while a job runs, so the model at its due time is the model it was sent."""
    one = ["federation.active_clients=1", 'algorithm.params.mode="code"']
    _, _, sent = run(tmp_path, one, name="sent")
    _, _, aliased = run(tmp_path, [*one, 'algorithm.params.job_base="aliased"'], name="aliased")
    assert [(m["t"], m["loss"], m["accuracy"]) for m in aliased] == [
        (m["t"], m["loss"], m["accuracy"]) for m in sent
    ]


def test_aliased_run_has_no_stale_arrival_after_the_first_jobs(tmp_path, ca2fl_run):
    """C = 4: in the sent form arrivals are stale; aliased, only the 4 jobs of time 0 can be (the code's
    initial slots hold copies of w_0), the timing is unchanged and the learning differs."""
    _, sent_events, sent = ca2fl_run
    over = ['algorithm.params.mode="code"', 'algorithm.params.job_base="aliased"']
    _, events, metrics = run(tmp_path, over, name="aliased")
    _, _, code = run(tmp_path, over[:1], name="code")
    stale = [e["staleness"] for e in events if e["kind"] == "model"]
    assert max(e["staleness"] for e in sent_events if e["kind"] == "model") > 0
    assert all(s == 0 for s in stale[4:]) and len(stale) == 15
    # the server measures staleness against the base it sent: it agrees that only the first jobs were stale
    last = metrics[-1]
    assert last["arrivals"] == 15 and last["mean_staleness"] * 15 == pytest.approx(sum(stale))
    assert [m["t"] for m in metrics] == [m["t"] for m in sent]
    assert [m["loss"] for m in metrics][1:] != [m["loss"] for m in code][1:]
