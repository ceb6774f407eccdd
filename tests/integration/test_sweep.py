"""`raysfl sweep` on real Ray Tune: trials equal plain runs, and a SIGKILLed sweep resumes to them.

Every trial is an ordinary raysfl run inside its own Tune placement group; these tests use a tiny synthetic
sweep (:mod:`tests.integration.tiny_sweep`) run once in this process (``swept``), so a trial takes seconds.
Failures and interrupts are in test_sweep_failures.py, which xdist can run beside this file.
"""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raysfl.cli import main
from raysfl.sweep.execute import run_sweep
from raysfl.sweep.spec import load_sweep
from tests.integration.tiny_sweep import TRIALS, recorded_status, rows, spawn


@pytest.fixture(scope="module")
def swept(sweep_file, tmp_path_factory) -> Path:
    """The sweep run once through Ray Tune in this process (the shared local Ray of the test session).

    ``trial_cpus = 2`` on the session's 4 CPUs: two trials at a time (by default a trial reserves its
    actors' 3.5 threads and they run one by one), so the tests below also show that trials sharing the
    machine compute exactly what a plain run does.
    """
    import ray

    if not ray.is_initialized():
        ray.init(
            address="local", num_cpus=4, include_dashboard=False, logging_level="WARNING", log_to_driver=False
        )
    out = tmp_path_factory.mktemp("swept") / "out"
    result = run_sweep(load_sweep(sweep_file), out, verbose=0, trial_cpus=2)
    assert result.finished == TRIALS and not result.failed and not result.unfinished
    return out


def _span(out: Path, trial: str) -> tuple[float, float]:
    """(start, end) wall-clock time of a trial, from Tune's result file."""
    lines = (out / "_tune" / trial / "result.json").read_text().splitlines()
    first, last = json.loads(lines[0]), json.loads(lines[-1])
    return first["timestamp"] - first["time_this_iter_s"], last["timestamp"]


def test_trial_cpus_runs_trials_side_by_side(swept):
    bundles = json.loads((swept / "sweep.json").read_text())["trials"]["gas_seed1"]["bundles"]
    assert sum(b["CPU"] for b in bundles) == pytest.approx(2.0, abs=1e-3)
    spans = [_span(swept, t) for t in TRIALS]
    overlapping = [(a, b) for i, a in enumerate(spans) for b in spans[i + 1 :] if a[0] < b[1] and b[0] < a[1]]
    assert overlapping, f"no two trials ran at the same time: {spans}"


def test_each_trial_is_exactly_the_run_of_its_scenario(ray_session, sweep_file, swept, tmp_path, capsys):
    # one trial of each method, of different seeds (every trial costs a plain run of seconds here)
    for trial, (method, seed) in (("gas_seed1", ("gas", 1)), ("fedavg_seed2", ("fedavg", 2))):
        params = "algorithm.params={q_s=4,q_c=4}" if method == "gas" else "algorithm.params={}"
        out = tmp_path / trial
        argv = [
            "run",
            str(sweep_file.parent / "tiny.toml"),
            f"algorithm.name={method}",
            params,
            f"seed={seed}",
        ]
        assert main([*argv, "engine.checkpoint_every=1", "--out", str(out)]) == 0
        assert rows(swept / trial / "metrics.parquet") == rows(out / "metrics.parquet"), trial
        assert rows(swept / trial / "events.parquet") == rows(out / "events.parquet"), trial
        assert any((swept / trial / "tb").iterdir())  # TensorBoard per trial: `tensorboard --logdir OUT`
    capsys.readouterr()
    status = json.loads((swept / "sweep.json").read_text())
    assert [t["status"] for t in status["trials"].values()] == ["finished"] * 4
    # Tune saw each evaluation: its result files hold the iteration, accuracy, emulated and wall time
    results = [
        json.loads(line) for line in (swept / "_tune" / "gas_seed1" / "result.json").read_text().splitlines()
    ]
    assert [r["global_iteration"] for r in results] == [0, 1, 2, 3]
    assert {"accuracy", "emulated_s", "wall_s"} <= results[-1].keys()
    final = pq.read_table(swept / "gas_seed1" / "metrics.parquet").to_pylist()[-1]
    assert results[-1]["accuracy"] == final["accuracy"] and results[-1]["emulated_s"] == final["t"]


def test_a_sweep_in_a_used_directory_is_refused(ray_session, sweep_file, swept, capsys):
    assert main(["sweep", str(sweep_file), "--out", str(swept)]) == 2
    assert (
        "already holds a sweep; nothing was changed in it. Continue it with --resume"
        in capsys.readouterr().err
    )


def test_a_sigkilled_sweep_resumes_without_rerunning_finished_trials(sweep_file, swept, tmp_path):
    out = tmp_path / "out"
    log = tmp_path / "first.log"
    proc = spawn(["sweep", str(sweep_file), "--out", str(out)], log)
    deadline = time.monotonic() + 240
    try:  # sweep.json says a trial finished as soon as it has, not only when the sweep ends
        while recorded_status(out, TRIALS[0]) != "finished":
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "sweep.json did not record the first trial's end in time"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert recorded_status(out, TRIALS[-1]) != "finished"  # killed mid-sweep
    rerun = [t for t in TRIALS if recorded_status(out, t) != "finished"]  # by the resumed sweep's Tune run
    time.sleep(2)  # the orphaned trial processes notice their raylet is gone
    first = {p: p.stat().st_mtime_ns for p in (out / TRIALS[0]).rglob("*") if p.is_file()}
    resumed = subprocess.run(
        [sys.executable, "-m", "raysfl.cli", "sweep", str(sweep_file), "--out", str(out), "--resume"],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert first == {p: p.stat().st_mtime_ns for p in (out / TRIALS[0]).rglob("*") if p.is_file()}
    status = json.loads((out / "sweep.json").read_text())
    assert [t["status"] for t in status["trials"].values()] == ["finished"] * 4
    for trial in TRIALS:  # whatever was cut short continued or restarted to the uninterrupted result
        assert rows(out / trial / "metrics.parquet") == rows(swept / trial / "metrics.parquet"), trial
    for trial in rerun:  # Tune's history is whole too: a trial continued from a checkpoint reports it first
        results = (out / "_tune" / trial / "result.json").read_text().splitlines()
        reported = [json.loads(line)["global_iteration"] for line in results]
        assert reported == [r["iteration"] for r in rows(out / trial / "metrics.parquet")], trial
