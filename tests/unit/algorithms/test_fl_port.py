"""PORT (no Ray): its weights and cosine by hand, the policy-driven flush, the staleness bound in a run."""

import math

import fl_helpers
import pytest
import torch
from fl_helpers import KEY, wt

from raysfl.algorithms.port import cosine, port_weight

BASE = {
    "name": "tiny-port",
    "seed": 3,
    "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 600, "synthetic_test": 200},
    "model": {"name": "lenet5"},
    "federation": {"num_clients": 8, "active_clients": 4},
    "train": {"global_iterations": 10, "local_iterations": 2, "batch_size": 16, "eval_every": 10},
    "algorithm": {"name": "port", "params": {"buffer_size": 1, "staleness_bound": 1}},
    "metrics": {"progress": False, "tensorboard": False},
}


def test_weight_and_cosine_by_hand():
    # (|D_i|/Σ|D|)·(ω_sim·(cos + 1)/2 + ω_stale·b/(s + b)) = ⅓·(1·1 + 3·10/10)
    assert port_weight(1, 3, 1.0, 0, 10, 1.0, 3.0) == pytest.approx(4 / 3)
    assert port_weight(2, 4, -1.0, 5, 5, 2.0, 1.0) == pytest.approx(0.5 * (0.0 + 0.5))
    assert cosine({"a": torch.tensor([1.0, 0.0])}, {"a": torch.tensor([1.0, 1.0])}) == pytest.approx(
        1 / math.sqrt(2)
    )
    assert cosine({"a": torch.zeros(2)}, {"a": torch.tensor([1.0, 1.0])}) is None


@pytest.mark.parametrize("delta_base", ["global", "start"])
def test_flush_by_hand(delta_base):
    """|D| = (1, 2, 1), ω = (1, 3), b = 10. Flush 1: two fresh updates (cos 1, s 0): raw = ⅓·4, ⅔·4 →
    p = (⅓, ⅔); w = [1, 2] + ⅓[2, 0] + ⅔[0, 4] = [5/3, 14/3]. Flush 2: client 2 (w = [5, 2], base [1, 2],
    s = 1, cos of [4, 0] with the progress [2/3, 8/3] = 1/√17) and client 0 (fresh, Δ = [0, −3]).
    delta_base = "global" (Plato): w ← w_1 + Σ p_i(w_i − w_1) = p_2·[5, 2] + p_0·w_0; "start": client 2's
    Δ = w_2 − w_{τ} = [4, 0]."""
    params = {"buffer_size": 2, "delta_base": delta_base}
    server = fl_helpers.tiny_server("port", params, sizes=(1, 2, 1), active=3)
    for k in (0, 1, 2):
        server.send_model(k)
    server.on_client_model(0, wt(3.0, 2.0), 1)
    server.on_client_model(1, wt(1.0, 6.0), 2)
    assert server.version == 0 and len(server.buffer) == 2  # arrivals never aggregate by themselves
    server.flush()
    assert server.version == 1
    assert torch.allclose(server.global_model()[KEY], wt(5 / 3, 14 / 3)[KEY])
    server.send_model(0)
    server.on_client_model(2, wt(5.0, 2.0), 1)
    server.on_client_model(0, wt(5 / 3, 14 / 3 - 3), 1)
    cos = 1 / math.sqrt(17)
    raw2 = 0.5 * ((cos + 1) / 2 + 3 * 10 / 11)
    raw0 = 0.5 * (1 + 3)
    server.flush()
    p2, p0 = raw2 / (raw2 + raw0), raw0 / (raw2 + raw0)
    if delta_base == "global":  # a weighted average of the two models: the stale one pulls back
        want = wt(p2 * 5 + p0 * 5 / 3, p2 * 2 + p0 * (14 / 3 - 3))
    else:
        want = wt(5 / 3 + 4 * p2, 14 / 3 - 3 * p0)
    assert torch.allclose(server.global_model()[KEY], want[KEY])
    with pytest.raises(RuntimeError, match="empty buffer"):
        server.flush()


def run(tmp_path, overrides=(), name="run"):
    return fl_helpers.run_scenario(BASE, tmp_path, overrides, name)


def test_staleness_bound_holds_updates_back(tmp_path):
    """b = 1, one arrival per update: an update waits while a job is more than b versions old (Plato), so
    none arrives older than b + 1; held updates batch several arrivals."""
    summary, events, metrics = run(tmp_path)
    models = [e for e in events if e["kind"] == "model"]
    assert max(e["staleness"] for e in models) == 2
    assert len(models) > 10  # some updates waited for a stale job and then took several arrivals
    assert sum(e["server_update"] or 0 for e in models) == 10 == metrics[-1]["updates"]
    assert metrics[-1]["buffered"] == 0 and summary["stop_reason"] == "budget reached"
    _, loose, _ = run(tmp_path, ["algorithm.params.staleness_bound=50"], name="loose")
    loose_models = [e for e in loose if e["kind"] == "model"]
    assert len(loose_models) == 10 and max(e["staleness"] for e in loose_models) > 2


def slow_device(tmp_path):
    """K = C = 4, device 3 a hundred times slower than the others (trace), fast links, b = 2."""
    trace = tmp_path / "devices.csv"
    rates = (1e10, 1e10, 1e10, 1e8)
    trace.write_text(
        "client,flops_per_s,uplink_bps,downlink_bps\n"
        + "".join(f"{k},{f},1,1\n" for k, f in enumerate(rates))
    )
    return [
        "federation.num_clients=4",
        "federation.active_clients=4",
        "train.local_iterations=4",
        "algorithm.params.staleness_bound=2",
        "system.compute.kind='trace'",
        "system.link.kind='fixed'",
        "system.link.uplink_bps=1e9",
        "system.link.downlink_bps=1e9",
        f"system.trace_file='{trace}'",
    ]


def test_urgent_requests_cut_the_stale_job_short(tmp_path):
    """request_update: the job holding an update back reports its completed steps at once [C Plato].

    Without requests every held update waits for the slow device's whole job; with them the slow device
    reports after the steps done by the request (at least one), its model row says how many, and the run
    reaches its 10 updates sooner, never staler than b + 1 = 3.
    """
    over = slow_device(tmp_path)
    _, waited, _ = run(tmp_path, [*over, "algorithm.params.request_update=false"], name="wait")
    _, asked, metrics = run(tmp_path, over, name="ask")
    assert not [e for e in waited if e["kind"] == "request"]
    requests = [e for e in asked if e["kind"] == "request"]
    assert requests and {e["client"] for e in requests} == {3}
    models = [e for e in asked if e["kind"] == "model"]
    for req in requests:
        (reply,) = [m for m in models if m["client"] == 3 and m["t"] >= req["t"]][:1]
        assert 1 <= reply["e"] == req["e"] < 4
        assert reply["staleness"] <= 3
    slow_models = [m for m in models if m["client"] == 3]
    starts = [e for e in asked if e["kind"] == "start" and e["client"] == 3]
    assert len(slow_models) in (len(starts), len(starts) - 1)  # one report per job (the last may still run)
    assert max(e["staleness"] for e in models) <= 3
    assert sum(e["server_update"] or 0 for e in models) == 10 == metrics[-1]["updates"]
    done_at = [max(e["t"] for e in ev if e["kind"] == "model") for ev in (waited, asked)]
    assert done_at[1] < done_at[0]
