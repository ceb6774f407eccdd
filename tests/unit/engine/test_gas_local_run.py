"""GAS on the in-process dispatcher: event-order invariants and buffer bookkeeping (no Ray)."""

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raysfl.engine import runner
from raysfl.scenario import load_scenario, scenario_from_dict

BASE = {
    "name": "tiny-gas",
    "seed": 7,
    "data": {"dataset": "synthetic", "partition": "shard", "synthetic_train": 600, "synthetic_test": 200},
    "model": {"name": "lenet5"},
    "federation": {"num_clients": 10, "active_clients": 3},
    "train": {"global_iterations": 3, "local_iterations": 4, "batch_size": 16},
    "algorithm": {"name": "gas", "params": {"q_s": 3, "q_c": 3, "covariance": "diagonal"}},
    "metrics": {"progress": False, "tensorboard": False},
}


def _run(tmp_path, overrides=(), name="run"):
    sc = scenario_from_dict(BASE, overrides)
    spied = []
    orig = runner.local_dispatcher

    def spy(prep, server_device=None):
        d = orig(prep, server_device)
        call = d.server.call

        def recording(method, *args, **kwargs):
            if method == "on_activations":
                spied.append(args[0])
            return call(method, *args, **kwargs)

        d.server.call = recording
        return d

    runner.local_dispatcher = spy
    try:
        summary = runner.run(sc, tmp_path / name, backend="local")
    finally:
        runner.local_dispatcher = orig
    events = pq.read_table(tmp_path / name / "events.parquet").to_pylist()
    metrics = pq.read_table(tmp_path / name / "metrics.parquet").to_pylist()
    return summary, events, metrics, spied


@pytest.fixture(scope="module")
def gas_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("gas"))


def test_time_never_goes_back(gas_run):
    _, events, _, _ = gas_run
    ts = [e["t"] for e in events]
    assert ts == sorted(ts)


def test_server_sees_activations_in_time_order(gas_run):
    _, events, _, server_calls = gas_run
    acts = [e["client"] for e in events if e["kind"] == "act"]
    assert server_calls == acts and len(acts) > 0


def test_each_client_runs_one_job_at_a_time_with_e_iterations(gas_run):
    _, events, _, _ = gas_run
    open_jobs: dict[int, int] = {}
    for e in events:
        k = e["client"]
        if e["kind"] == "start":
            assert k not in open_jobs, f"client {k} started twice"
            open_jobs[k] = 0
        elif e["kind"] == "act":
            assert e["e"] == open_jobs[k] + 1  # one forward in flight, iterations in order
            open_jobs[k] = e["e"]
        elif e["kind"] == "model":
            assert open_jobs.pop(k) == 4  # E = 4 local iterations then the model upload


def test_buffer_flush_and_aggregation_counts(gas_run):
    summary, events, metrics, _ = gas_run
    n_act = sum(e["kind"] == "act" for e in events)
    n_model = sum(e["kind"] == "model" for e in events)
    assert n_model == 3 * 3  # T = 3 aggregations of Q_c = 3 models
    assert sum(e["server_update"] or 0 for e in events) == n_act // 3  # one update per Q_s = 3 arrivals
    last = metrics[-1]
    assert last["iteration"] == 3 and last["aggregations"] == 3
    assert last["server_updates"] == n_act // 3
    assert last["generated"] > 0
    assert [m["iteration"] for m in metrics] == [0, 1, 2, 3]
    assert summary["global_iterations"] == 3 and summary["stop_reason"] == "budget reached"


def test_bytes_are_counted_from_the_model(gas_run):
    summary, events, _, _ = gas_run
    acts = [e for e in events if e["kind"] == "act"]
    # activations up carry an int64 label per sample on top of the gradient-sized tensor
    per_sample = acts[0]["bytes_up"] / 16
    assert per_sample == pytest.approx(acts[0]["bytes_down"] / 16 + 8)
    assert summary["bytes_up"] == sum(e["bytes_up"] or 0 for e in events)


def test_same_seed_same_metrics_and_generate_false_differs(tmp_path, gas_run):
    _, _, metrics, _ = gas_run
    _, _, again, _ = _run(tmp_path, name="again")
    assert [m["accuracy"] for m in again] == [m["accuracy"] for m in metrics]
    assert [m["loss"] for m in again] == [m["loss"] for m in metrics]
    _, _, plain, _ = _run(tmp_path, ["algorithm.params.generate=false"], name="plain")
    assert plain[-1]["generated"] == 0
    assert [m["loss"] for m in plain] != [m["loss"] for m in metrics]


def test_reference_code_options_run_end_to_end(tmp_path, gas_run):
    """Every [C] option of specs/gas.md §11 at once: runs, generates, and changes the result."""
    code = [
        'algorithm.params.progress="code"',
        'algorithm.params.stats_update="per-flush"',
        'algorithm.params.generation="top-up"',
        'algorithm.params.generation_gate="all-labels"',
        'algorithm.params.aggregation="uniform"',
        'algorithm.params.server_update="after-gradient"',
        'algorithm.params.optimizer_state="shared"',
        'algorithm.params.covariance="full"',
        "train.clip_grad_norm=10.0",
        'system.timing.flops_accounting="per-sample"',
        "system.timing.free_downloads=true",
        "system.timing.client_pass_flops=5603328",
        "system.timing.activation_bits=131072",
        "system.timing.client_model_bits=620544",
    ]
    summary, events, metrics, _ = _run(tmp_path, code, name="code")
    assert metrics[-1]["generated"] > 0 and summary["global_iterations"] == 3
    # the code's constant message sizes: B = 16 activation samples of 131,072 bits, a 620,544-bit model
    assert {e["bytes_up"] for e in events if e["kind"] == "act"} == {16 * 131_072 // 8}
    assert {e["bytes_up"] for e in events if e["kind"] == "model"} == {620_544 // 8}
    assert [m["loss"] for m in metrics] != [m["loss"] for m in gas_run[2]]
    assert all((e["bytes_down"] or 0) >= 0 for e in events)


def test_the_reference_code_scenario_sets_the_codes_options():
    """scenarios/gas/reference_code.toml is the code's setting in full (docs/algorithms/gas.md's table)."""
    sc = load_scenario(Path(__file__).resolve().parents[3] / "scenarios/gas/reference_code.toml")
    p = sc.algorithm.params
    assert (sc.data.dataset, sc.data.partition, sc.data.shards_per_client) == ("fashion-mnist", "shard", 2)
    assert sc.data.normalization == "gas-code"  # Normalize(0.286, 0.3205), specs/gas.md §10.11
    assert (p["progress"], p["stats_update"], p["covariance"], p["generation"]) == (
        "code",
        "per-flush",
        "full",
        "top-up",
    )
    assert (p["generation_gate"], p["aggregation"], p["server_update"], p["optimizer_state"]) == (
        "all-labels",
        "uniform",
        "after-gradient",
        "shared",
    )
    assert sc.train.clip_grad_norm == 10.0
    t = sc.system.timing
    assert (t.flops_accounting, t.free_downloads) == ("per-sample", True)
    assert (t.client_pass_flops, t.activation_bits, t.client_model_bits) == (5_603_328, 131_072, 620_544)
    assert (sc.system.link.placement, sc.system.link.bandwidth_mode) == ("radius", "per-client")


def test_full_participation_restarts_the_client_that_finished(tmp_path):
    """C = K: no client is idle when one finishes (the draw from an empty list used to crash); the one
    that finished starts again at once, and every client keeps one job at a time."""
    overrides = ["federation.num_clients=5", "federation.active_clients=5", "train.global_iterations=4"]
    summary, events, metrics, _ = _run(tmp_path, overrides)
    assert summary["stop_reason"] != "interrupted" and metrics[-1]["iteration"] == 4
    starts = [e for e in events if e["kind"] == "start"]
    models = [e for e in events if e["kind"] == "model"]
    assert len(starts) > 5  # restarts beyond the initial five
    restarts = [(s["client"], s["t"]) for s in starts[5:]]
    assert restarts == [(m["client"], m["t"]) for m in models[: len(restarts)]]  # same client, same time
    assert {e["client"] for e in events} == set(range(5))
