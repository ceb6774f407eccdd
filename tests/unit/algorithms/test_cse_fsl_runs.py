"""CSE-FSL, FSL_AN, SplitFed V1 (FSL_MC) and V2 (FSL_OC) end to end on the in-process dispatcher (no Ray).

Tiny synthetic configuration (the one computed by hand in test_cse_fsl_accounting.py): 3 clients × 200
samples, B = 16, lenet5 cut at conv2 with the MLP auxiliary head, 2 rounds.
"""

import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch

from raysfl.algorithms import cse_fsl
from raysfl.algorithms.common.fsl_accounting import round_bytes, storage_params
from raysfl.config import ConfigError
from raysfl.data.errors import DataNotFoundError
from raysfl.engine import runner
from raysfl.models.flops import count_params
from raysfl.models.zoo import build_split_model
from raysfl.scenario import load_scenario, scenario_from_dict

ROOT = Path(__file__).resolve().parents[3]
METHODS = ("cse_fsl", "fsl_an", "splitfed_v1", "splitfed_v2")
LOCAL_LOSS = ("cse_fsl", "fsl_an")
T = 2


def base(method: str) -> dict:
    return {
        "name": f"tiny-{method}",
        "seed": 7,
        "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 600, "synthetic_test": 200},
        "model": {"name": "lenet5", "aux": "mlp" if method in LOCAL_LOSS else ""},
        "federation": {"num_clients": 3, "active_clients": 3},
        "train": {"global_iterations": T, "batch_size": 16, "lr": 0.05, "momentum": 0.0, "weight_decay": 0.0},
        "algorithm": {"name": method, "params": {}},
        "engine": {"torch_threads": 1, "server_threads": 1},  # no OpenMP spinning on a shared 2-core box
        "metrics": {"progress": False, "tensorboard": False},
    }


def run(tmp_path, method, overrides=(), name="run"):
    """Run; also record every server call and its result, and every client call."""
    sc = scenario_from_dict(base(method), overrides)
    server_calls, client_calls = [], []
    orig = runner.local_dispatcher

    def spy(prep, server_device=None):
        d = orig(prep, server_device)
        s_call, c_call = d.server.call, d.clients.call

        def s_rec(m, *args, **kw):
            out = s_call(m, *args, **kw)
            server_calls.append((m, args, out))
            return out

        def c_rec(m, client, *args, **kw):
            client_calls.append((m, client))
            return c_call(m, client, *args, **kw)

        d.server.call, d.clients.call = s_rec, c_rec
        return d

    runner.local_dispatcher = spy
    try:
        summary = runner.run(sc, tmp_path / name, backend="local")
    finally:
        runner.local_dispatcher = orig
    events = pq.read_table(tmp_path / name / "events.parquet").to_pylist()
    metrics = pq.read_table(tmp_path / name / "metrics.parquet").to_pylist()
    return {
        "summary": summary,
        "events": events,
        "metrics": metrics,
        "server": server_calls,
        "client": client_calls,
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fsl")
    return {m: run(tmp, m, name=m) for m in METHODS}


def sizes(method):
    """(P_c, P_s, P_a, q) of the tiny model."""
    sc = scenario_from_dict(base(method))
    with torch.device("meta"):
        m = build_split_model(sc.model, 1, 28, 10, seed=0)
    return count_params(m.client), count_params(m.server), count_params(m.aux), math.prod(m.activation_shape)


def rules_of(method, overrides=()):
    """The method's FSLRules for the tiny scenario."""
    sc = scenario_from_dict(base(method), overrides)
    return cse_fsl.RULES[method](sc.params)


@pytest.mark.parametrize("method", METHODS)
def test_counted_bytes_equal_the_accounting_and_the_event_log(runs, method):
    r = runs[method]
    last = r["metrics"][-1]
    pc, _, pa, q = sizes(method)
    want = round_bytes(rules_of(method), [200] * 3, 16, q, pc, pa)
    got = (
        last["bytes_up_smashed"],
        last["bytes_up_labels"],
        last["bytes_down_gradients"],
        last["bytes_up_models"],
        last["bytes_down_models"],
    )
    assert got == (
        want.smashed * T,
        want.labels * T,
        want.gradients * T,
        want.models_up * T,
        want.models_down * T,
    )
    assert last["load_bytes"] == want.load * T
    # the schedule's Log rows (time model) carry the same sizes as the tensors the server counted
    ev = r["events"]
    assert sum(e["bytes_up"] or 0 for e in ev) == last["bytes_up_counted"] == r["summary"]["bytes_up"]
    assert sum(e["bytes_down"] or 0 for e in ev) == last["bytes_down_counted"] == r["summary"]["bytes_down"]
    assert sum(e["bytes_labels"] or 0 for e in ev) == last["bytes_up_labels"]
    for row in r["metrics"]:  # at every evaluation, not only the last
        assert row["bytes_up"] == row["bytes_up_counted"] and row["bytes_down"] == row["bytes_down_counted"]


def test_hand_computed_values_of_the_tiny_configuration(runs):
    cse, mc = runs["cse_fsl"]["metrics"][-1], runs["splitfed_v1"]["metrics"][-1]
    assert (cse["bytes_up_smashed"], cse["bytes_up_labels"], cse["bytes_up_models"]) == (
        2 * 153_600,
        2 * 768,
        2 * 78_984,
    )
    assert (mc["bytes_up_smashed"], mc["bytes_down_gradients"], mc["bytes_down_models"]) == (
        2 * 960_000,
        2 * 960_000,
        2 * 30_864,
    )


@pytest.mark.parametrize("method", LOCAL_LOSS)
def test_local_loss_methods_send_no_gradients(runs, method):
    r = runs[method]
    assert r["metrics"][-1]["bytes_down_gradients"] == 0
    assert all(out is None for m, _, out in r["server"] if m == "on_smashed")
    assert all(e["bytes_down"] is None for e in r["events"] if e["kind"] in ("upload", "model"))
    assert {m for m, _ in r["client"]} == {
        "load",
        "run",
        "weights",
    }  # never a backward from a server gradient


@pytest.mark.parametrize("method", ("splitfed_v1", "splitfed_v2"))
def test_gradient_methods_return_one_gradient_per_upload(runs, method):
    r = runs[method]
    outs = [(args[1][0], out) for m, args, out in r["server"] if m == "on_smashed"]
    assert len(outs) == 3 * 13 * T
    assert all(out.shape == acts.shape for acts, out in outs)
    assert sum(e["kind"] == "upload" for e in r["events"]) == 3 * 13 * T


def test_upload_counts_follow_h_and_the_rule(runs, tmp_path):
    assert runs["cse_fsl"]["metrics"][-1]["uploads"] == 3 * 2 * T  # batches 4 and 9 of 13
    assert runs["fsl_an"]["metrics"][-1]["uploads"] == 3 * 13 * T
    first = run(tmp_path, "cse_fsl", ['algorithm.params.upload_rule="first_of_window"'])
    assert first["metrics"][-1]["uploads"] == 3 * 3 * T  # batches 0, 5, 10
    assert sorted({e["e"] for e in first["events"] if e["kind"] == "upload"}) == [0, 5, 10]


@pytest.mark.parametrize("method", METHODS)
def test_storage_matches_table_v_formula(runs, method):
    pc, ps, pa, _ = sizes(method)
    last = runs[method]["metrics"][-1]
    assert last["storage_params"] == storage_params(rules_of(method), 3, pc, ps, pa)


def test_server_storage_does_not_grow_with_clients_for_cse_but_does_for_mc(tmp_path):
    got = {}
    for method in ("cse_fsl", "splitfed_v1", "fsl_an", "splitfed_v2"):
        for k in (3, 6):
            r = run(
                tmp_path,
                method,
                [
                    f"federation.num_clients={k}",
                    f"federation.active_clients={k}",
                    "train.global_iterations=1",
                ],
                name=f"{method}{k}",
            )
            got[method, k] = r["metrics"][-1]["storage_server_params"]
    ps = sizes("cse_fsl")[1]
    assert got["cse_fsl", 3] == got["cse_fsl", 6] == ps
    assert got["splitfed_v2", 3] == got["splitfed_v2", 6] == ps
    assert (got["splitfed_v1", 3], got["splitfed_v1", 6]) == (3 * ps, 6 * ps)
    assert (got["fsl_an", 3], got["fsl_an", 6]) == (3 * ps, 6 * ps)


@pytest.mark.parametrize("method", METHODS)
def test_emulated_time_moves_forward_and_every_round_is_evaluated(runs, method):
    r = runs[method]
    ts = [e["t"] for e in r["events"]]
    assert ts == sorted(ts) and ts[-1] > 0
    assert [m["iteration"] for m in r["metrics"]] == list(range(T + 1))
    evals = [m["t"] for m in r["metrics"]]
    assert evals == sorted(evals) and evals[-1] > 0
    assert r["summary"]["stop_reason"] == "budget reached" and r["metrics"][-1]["aggregations"] == T


def test_cse_server_takes_uploads_in_emulated_arrival_order(runs):
    r = runs["cse_fsl"]
    served = [args[0] for m, args, _ in r["server"] if m == "on_smashed"]
    logged = [e["client"] for e in r["events"] if e["kind"] == "upload"]
    assert served == logged and len(served) == 3 * 2 * T
    assert all(e["staleness"] == 0 for e in r["events"] if e["kind"] == "upload")


def test_round_robin_order_is_client_by_client_per_window(tmp_path):
    r = run(tmp_path, "cse_fsl", ['algorithm.params.server_order="round_robin"'])
    served = [args[0] for m, args, _ in r["server"] if m == "on_smashed"]
    assert served == [0, 1, 2, 0, 1, 2] * T
    rnd = run(tmp_path, "cse_fsl", ['algorithm.params.server_order="random"'], name="random")
    served = [args[0] for m, args, _ in rnd["server"] if m == "on_smashed"]
    for w in range(0, len(served), 3):  # each window holds every client once
        assert sorted(served[w : w + 3]) == [0, 1, 2]


def test_aggregation_every_c_batches(tmp_path):
    r = run(tmp_path, "cse_fsl", ["algorithm.params.agg_every_batches=5"])
    last = r["metrics"][-1]
    assert last["aggregations"] == 3 * T  # segments [0,5), [5,10), [10,13)
    pc, _, pa, q = sizes("cse_fsl")
    want = round_bytes(
        rules_of("cse_fsl", ["algorithm.params.agg_every_batches=5"]), [200] * 3, 16, q, pc, pa
    )
    assert last["bytes_up_models"] == want.models_up * T == 3 * 78_984 * T
    assert [m["iteration"] for m in r["metrics"]] == list(range(T + 1))


def test_runs_are_deterministic_and_options_change_the_result(runs, tmp_path):
    ref = runs["cse_fsl"]
    again = run(tmp_path, "cse_fsl", name="again")
    assert [m["loss"] for m in again["metrics"]] == [m["loss"] for m in ref["metrics"]]
    assert [e["t"] for e in again["events"]] == [e["t"] for e in ref["events"]]
    skew = ['data.partition="dirichlet"', "data.alpha=0.5", "data.min_client_size=50"]  # unequal |D_i|
    plain = [m["loss"] for m in run(tmp_path, "cse_fsl", skew, name="skew")["metrics"]]
    for opt in ("algorithm.params.recompute_after_update=false", 'algorithm.params.aggregation="data-size"'):
        other = run(tmp_path, "cse_fsl", [*skew, opt], name=opt.split(".")[-1].split("=")[0])
        assert [m["loss"] for m in other["metrics"]] != plain


def test_drop_last_and_partial_participation(tmp_path):
    r = run(tmp_path, "fsl_an", ["algorithm.params.drop_last=true"])
    assert r["metrics"][-1]["bytes_up_smashed"] == 3 * 192 * 1600 * T
    p = run(tmp_path, "cse_fsl", ["federation.num_clients=6", "federation.active_clients=2"], name="partial")
    rounds = [
        {e["client"] for e in p["events"] if e["kind"] == "model" and e["version"] == v} for v in range(T)
    ]
    assert all(len(s) == 2 for s in rounds)
    assert p["metrics"][-1]["storage_params"] == storage_params(rules_of("cse_fsl"), 2, *sizes("cse_fsl")[:3])


def test_validation_of_the_auxiliary_head():
    from raysfl.config import ConfigError

    with pytest.raises(ConfigError, match="model.aux: cse_fsl trains the client through an auxiliary head"):
        scenario_from_dict(base("cse_fsl"), ['model.aux=""'])
    with pytest.raises(ConfigError, match="model.aux: splitfed_v1 has no auxiliary head"):
        scenario_from_dict(base("splitfed_v1"), ['model.aux="mlp"'])


def test_tensorboard_gets_per_kind_bytes_and_storage(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run(tmp_path, "splitfed_v1", ["metrics.tensorboard=true", "train.global_iterations=1"], name="tb")
    acc = EventAccumulator(str(tmp_path / "tb" / "tb"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    for tag in (
        "comm/bytes_up_smashed",
        "comm/bytes_up_labels",
        "comm/bytes_down_gradients",
        "comm/bytes_up_models",
        "comm/bytes_down_models",
        "comm/load_gib",
        "storage/storage_params",
        "storage/storage_server_params",
        "test/accuracy_vs_bytes",
        "test/accuracy_vs_emulated_ms",
    ):
        assert tag in tags, tag


def test_femnist_scenario_validates_and_fails_with_the_data_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAYSFL_DATA", raising=False)
    sc = load_scenario(ROOT / "scenarios" / "cse_fsl" / "table5" / "femnist_noniid_cse_fsl_h2_quick.toml")
    # §2.7-8: Table V's loads assume the code's 209-sample contiguous clients
    assert (sc.data.dataset, sc.data.partition, sc.federation.num_clients) == ("femnist", "contiguous", 3500)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataNotFoundError, match="FEMNIST"):
        runner.run(sc, tmp_path / "out", backend="local", data_dir=str(tmp_path / "empty"))


def test_a_slow_server_queues_uploads_and_the_evaluation_waits_for_it(tmp_path):
    r = run(tmp_path, "cse_fsl", ["system.server_flops_per_s=1e6", "train.global_iterations=1"], name="slow")
    ups = [e for e in r["events"] if e["kind"] == "upload"]
    assert any(e["queue_s"] > 0 for e in ups) and all(e["queue_s"] >= 0 for e in ups)
    last_model = max(e["t"] for e in r["events"] if e["kind"] == "model")
    assert r["metrics"][-1]["t"] > last_model  # stamped when x_s has taken the round's last upload


def test_an_h_beyond_every_clients_batches_is_refused_before_training(tmp_path, capsys):
    """h = 14 > the 13 minibatches each client has a round: nothing reached the server, which never
    trained, and the run finished at chance without a word."""
    with pytest.raises(
        ConfigError, match=r"algorithm.params.h: h = 14 exceeds the 13 minibatches .* use h ≤ 13"
    ):
        run(tmp_path, "cse_fsl", ["algorithm.params.h=14"], name="h14")
    # 601 samples over 3 clients, B = 20: 201 → 11 batches, 200 → 10; h = 11 leaves two clients silent
    sizes = ["data.synthetic_train=601", "train.batch_size=20", "algorithm.params.h=11"]
    r = run(tmp_path, "cse_fsl", sizes, name="h11")
    assert "h = 11 exceeds the 10 minibatches a round (local_epochs · ⌈|D_i|/B⌉) of 2 of the 3" in (
        capsys.readouterr().err
    )
    assert {e["client"] for e in r["events"] if e["kind"] == "upload"} == {0}
    # h = 12 silences all three; their batch counts differ, so the message gives their range
    silent = r"h = 12 exceeds the 10–11 minibatches .* of 3 of the 3 .* use h ≤ 11"
    with pytest.raises(ConfigError, match=silent):
        run(tmp_path, "cse_fsl", [*sizes[:2], "algorithm.params.h=12"], name="h12")


def test_drop_last_with_a_client_smaller_than_a_batch_is_refused_before_training(tmp_path):
    with pytest.raises(ConfigError, match=r"train.batch_size: client 0 holds 200 samples, fewer than"):
        run(tmp_path, "cse_fsl", ["train.batch_size=250", "algorithm.params.drop_last=true"], name="dl")
