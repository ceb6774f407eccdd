"""The opt-in profiler (raysfl/profiling.py) and the scripts benchmarks/profile_gas.py, profile_fl.py.

The scripts run on a tiny synthetic scenario; the tests check the tables' structure and that each lane's
parts add up to its wall time, never speed. A profiled run must compute the numbers of an unprofiled one.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
from pathlib import Path

import pytest
import torch

from raysfl import profiling
from raysfl.config import dumps_toml
from raysfl.engine.ray_backend import task_phases
from tests.conftest import on_sys_path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"


@pytest.fixture(scope="module")
def prof_mod():
    """``benchmarks/_profiling.py`` imported as the scripts import it (benchmarks/ on sys.path)."""
    with on_sys_path(BENCH):
        yield importlib.import_module("_profiling")


@pytest.fixture
def keep_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def tiny(method: dict) -> dict:
    """Synthetic data, LeNet-5, 6 clients (3 active), 2 local iterations: seconds, not minutes.

    ``method``: the scenario's ``algorithm`` table and any ``train`` settings the method requires.
    """
    return {
        "name": "tiny-profile",
        "seed": 5,
        "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 240, "synthetic_test": 40},
        "model": {"name": "lenet5"},
        "federation": {"num_clients": 6, "active_clients": 3},
        "train": {"global_iterations": 1, "local_iterations": 2, "batch_size": 16, **method.get("train", {})},
        "algorithm": method["algorithm"],
    }


GAS = {
    "algorithm": {
        "name": "gas",
        "params": {"q_s": 2, "q_c": 3, "covariance": "full", "generation_gate": "any-label"},
    }
}
FEDAVG = {"algorithm": {"name": "fedavg"}}
FEDASMU = {"algorithm": {"name": "fedasmu", "params": {"local_epochs": 2}}, "train": {"momentum": 0.0}}


# --- the profiler itself --------------------------------------------------------------------------------
def test_off_by_default_and_a_shared_null_context():
    assert profiling.ACTIVE is None
    assert profiling.section("a") is profiling.section("b", batch=3)


def test_nested_sections_keep_exclusive_times_that_add_up():
    prof = profiling.enable("t")
    try:
        with profiling.section("outer"):
            with profiling.section("inner", batch=4):
                sum(range(20000))
            with profiling.section("inner", batch=4):
                sum(range(20000))
    finally:
        assert profiling.disable() is prof
    rep = prof.report()
    outer, inner = rep["sections"]["outer"], rep["sections"]["inner"]
    assert outer["calls"] == 1 and inner["calls"] == 2
    assert inner["exclusive_s"] == pytest.approx(inner["inclusive_s"])
    assert outer["exclusive_s"] + inner["inclusive_s"] == pytest.approx(outer["inclusive_s"])
    assert rep["outer_s"] == pytest.approx(outer["inclusive_s"])
    assert rep["batches"] == {"inner": {4: 2}}
    assert profiling.ACTIVE is None


def test_task_phases_sum_ray_timeline_events_per_worker():
    events = [
        {"cat": "task:execute", "tid": "worker:w1", "ts": 1.0e6, "dur": 7_000.0},  # before profiling
        {"cat": "task:deserialize_arguments", "tid": "worker:w1", "ts": 5.0e6, "dur": 1500.0},
        {"cat": "task:execute", "tid": "worker:w1", "ts": 5.1e6, "dur": 10_000.0},
        {"cat": "task:execute", "tid": "worker:w1", "ts": 6.0e6, "dur": 5_000.0},
        {"cat": "task:store_outputs", "tid": "worker:w2", "ts": 6.0e6, "dur": 250.0},
        {"cat": "submit_task", "tid": "driver", "ts": 6.0e6, "dur": 9.0},
    ]
    got = task_phases(events, "w1", since_epoch_s=2.0)
    assert got["task:execute"] == {"calls": 2, "s": pytest.approx(0.015)}
    assert got["task:deserialize_arguments"]["s"] == pytest.approx(0.0015)
    assert set(got) == {"task:execute", "task:deserialize_arguments"}
    assert task_phases(events, "w2") == {"task:store_outputs": {"calls": 1, "s": pytest.approx(0.00025)}}


def test_an_actor_lane_splits_its_wall_time_into_sections_ray_phases_and_idle(prof_mod):
    lane = {
        "lane": "server",
        "wall_s": 10.0,
        "outer_s": 6.0,
        "sections": {
            "server.on_activations": {"calls": 3, "inclusive_s": 6.0, "exclusive_s": 1.0},
            "server.grad": {"calls": 3, "inclusive_s": 5.0, "exclusive_s": 5.0},
        },
        "ray_phases": {
            "task:deserialize_arguments": {"calls": 3, "s": 0.5},
            "task:execute": {"calls": 3, "s": 6.5},
            "task:store_outputs": {"calls": 3, "s": 0.25},
        },
    }
    rows, wall = prof_mod.lane_rows(lane)
    by = {r.name: r.seconds for r in rows}
    assert by["ray.worker_glue"] == pytest.approx(0.5)
    assert by["idle"] == pytest.approx(10.0 - 6.0 - 0.5 - 0.5 - 0.25)
    assert sum(by.values()) == pytest.approx(wall)


# --- the scripts ----------------------------------------------------------------------------------------
def _lanes(table: str) -> dict[str, tuple[list[float], float]]:
    """Per lane of a breakdown table: the seconds of its rows and of its total row."""
    out: dict[str, tuple[list[float], float]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 7 or cells[0] in ("lane", "---"):
            continue
        parts, total = out.setdefault(cells[0], ([], 0.0))
        if cells[1] == "**total (wall)**":
            out[cells[0]] = (parts, float(cells[4]))
        else:
            parts.append(float(cells[4]))
    return out


def _run_script(prof_mod, capsys, tmp_path: Path, method: dict, default: str) -> tuple[str, dict]:
    toml = tmp_path / "tiny.toml"
    toml.write_text(dumps_toml(tiny(method)))
    report = tmp_path / "profile.json"
    argv = ["--scenario", str(toml), "--iterations", "1", "--peak-seconds", "0.01", "--json", str(report)]
    assert prof_mod.main("doc", default, 1, argv) == 0
    return capsys.readouterr().out, json.loads(report.read_text())


@pytest.mark.parametrize(
    ("method", "must"),
    [
        (
            GAS,
            {
                "server.grad",
                "server.update",
                "server.stats",
                "server.cholesky",
                "server.sample",
                "client.forward",
                "client.backward",
                "server.aggregate",
                "eval.forward",
            },
        ),
        (FEDAVG, {"client.forward_backward", "client.data", "server.aggregate", "eval.forward"}),
        (FEDASMU, {"client.forward_backward", "client.data", "client.optimizer", "eval.forward"}),
    ],
    ids=["gas", "fedavg", "fedasmu"],
)
def test_profile_script_prints_a_breakdown_whose_parts_sum_to_the_wall_time(
    prof_mod, capsys, tmp_path, keep_threads, method, must
):
    out, report = _run_script(prof_mod, capsys, tmp_path, method, "unused.toml")
    assert "| lane | part | section | calls | total s | share % | mean ms |" in out
    lanes = _lanes(out)
    assert list(lanes) == ["process"]  # the local backend: one process
    parts, total = lanes["process"]
    assert total > 0
    assert sum(parts) == pytest.approx(total, abs=0.0005 * len(parts) + 1e-3)
    named = set(re.findall(r"`([a-z_.]+)`", out))
    assert must | {"coordinator", "unaccounted", "setup.prepare"} <= named
    # the raw report: exclusive times + unaccounted = wall, exactly
    excl = sum(s["exclusive_s"] for s in report["sections"].values())
    assert excl <= report["wall_s"] and report["outer_s"] == pytest.approx(excl)
    # the FLOP table: every counted pass kind with a positive count, and the peaks
    assert "| model pass | passes | GFLOP | s | GFLOP/s |" in out
    assert "| **all model passes** |" in out
    assert re.search(r"\| matmul 1024² float32, 1 thread\(s\) \| [0-9.]+ \|", out)
    assert profiling.ACTIVE is None


def test_scripts_exist_and_name_their_default_scenarios():
    for script, scenario in (
        ("profile_gas.py", "scenarios/gas/reference_code.toml"),
        ("profile_fl.py", "scenarios/fedasmu/table4/fmnist_lenet5_fedavg_quick.toml"),
    ):
        text = (BENCH / script).read_text()
        assert scenario in text and (ROOT / scenario).is_file()


def test_a_profiled_run_computes_the_pinned_numbers(tmp_path, keep_threads):
    """Profiling only reads clocks: GAS's pinned scenario (test_pinned_metrics.py) gives, bit for bit, the
    numbers of the same run without profiling on this machine (the pins themselves may come from another
    processor, whose last bits differ)."""
    spec = importlib.util.spec_from_file_location(
        "pinned_metrics_for_profiling", ROOT / "tests/unit/algorithms/test_pinned_metrics.py"
    )
    assert spec is not None and spec.loader is not None
    pinned = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pinned)
    profiling.enable("process")
    try:
        got = json.loads(json.dumps(pinned.measure("gas", tmp_path / "gas")))
    finally:
        prof = profiling.disable()
    assert prof is not None and prof.stats["server.grad"][0] > 0
    unprofiled = json.loads(json.dumps(pinned.measure("gas", tmp_path / "gas-unprofiled")))
    assert got == unprofiled
    assert pinned.mismatch(got, pinned._pins()["gas"], exact=False) is None


def test_the_peaks_are_measured_in_the_runs_precision(prof_mod, keep_threads, monkeypatch):
    """A bfloat16 run's passes are set against bfloat16 peaks (autocast, as its layers compute)."""
    timed = prof_mod._rate
    dtypes: list[torch.dtype] = []

    def rate_recording_dtype(fn, flops, seconds):
        dtypes.append(fn().dtype)
        return timed(fn, flops, seconds)

    monkeypatch.setattr(prof_mod, "_rate", rate_recording_dtype)
    for precision, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        dtypes.clear()
        peaks = prof_mod.measure_peaks([1], 0.01, precision)
        assert sorted(peaks) == [
            f"conv 3×3 64→128, 32×28×28, {precision}, 1 thread(s)",
            f"matmul 1024² {precision}, 1 thread(s)",
        ]
        assert all(rate > 0 for rate in peaks.values())
        assert dtypes == [dtype, dtype]  # the matmul and the convolution compute in the run's precision
