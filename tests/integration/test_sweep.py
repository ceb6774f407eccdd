"""`raysfl sweep` on real Ray Tune: trials equal plain runs, a SIGKILLed sweep resumes, failures recorded.

Every trial is an ordinary raysfl run inside its own Tune placement group; these tests use a tiny synthetic
scenario so a trial takes seconds.
"""

import json
import os
import re
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

BASE = """
name = "tiny"
seed = 11
[data]
dataset = "synthetic"
partition = "shard"
synthetic_train = 600
synthetic_test = 200
[model]
name = "lenet5"
[federation]
num_clients = 10
active_clients = 4
[train]
global_iterations = 3
local_iterations = 3
batch_size = 16
[algorithm]
name = "gas"
[algorithm.params]
q_s = 4
q_c = 4
[metrics]
progress = false
"""

SWEEP = """
base = "tiny.toml"
[set]
"engine.checkpoint_every" = 1
[link.method]
"algorithm.name" = ["gas", "fedavg"]
"algorithm.params" = [{ q_s = 4, q_c = 4 }, {}]
[grid]
seed = [1, 2]
"""
TRIALS = ["gas_seed1", "gas_seed2", "fedavg_seed1", "fedavg_seed2"]


def _rows(path: Path) -> list[dict]:
    table = pq.read_table(path)
    return table.drop([c for c in ("wall_s",) if c in table.column_names]).to_pylist()


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sweep")
    (root / "tiny.toml").write_text(BASE)
    (root / "table.sweep.toml").write_text(SWEEP)
    return root / "table.sweep.toml"


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
        assert _rows(swept / trial / "metrics.parquet") == _rows(out / "metrics.parquet"), trial
        assert _rows(swept / trial / "events.parquet") == _rows(out / "events.parquet"), trial
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


def _spawn(argv: list[str], log: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-m", "raysfl.cli", *argv], stdout=log.open("w"), stderr=subprocess.STDOUT, env=env
    )


def _recorded_status(out: Path, trial: str) -> str | None:
    status = out / "sweep.json"
    return json.loads(status.read_text())["trials"][trial].get("status") if status.is_file() else None


def test_a_sigkilled_sweep_resumes_without_rerunning_finished_trials(sweep_file, swept, tmp_path):
    out = tmp_path / "out"
    log = tmp_path / "first.log"
    proc = _spawn(["sweep", str(sweep_file), "--out", str(out)], log)
    deadline = time.monotonic() + 240
    try:  # sweep.json says a trial finished as soon as it has, not only when the sweep ends
        while _recorded_status(out, TRIALS[0]) != "finished":
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "sweep.json did not record the first trial's end in time"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert _recorded_status(out, TRIALS[-1]) != "finished"  # killed mid-sweep
    rerun = [t for t in TRIALS if _recorded_status(out, t) != "finished"]  # by the resumed sweep's Tune run
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
        assert _rows(out / trial / "metrics.parquet") == _rows(swept / trial / "metrics.parquet"), trial
    for trial in rerun:  # Tune's history is whole too: a trial continued from a checkpoint reports it first
        results = (out / "_tune" / trial / "result.json").read_text().splitlines()
        reported = [json.loads(line)["global_iteration"] for line in results]
        assert reported == [r["iteration"] for r in _rows(out / trial / "metrics.parquet")], trial


def test_a_second_ctrl_c_still_says_how_to_resume(sweep_file, tmp_path):
    """The first Ctrl-C asks Tune to save its state; a second ends it at once, and the sweep says so.

    Before, the second one reached the command line's catch-all and printed only "interrupted". The child
    gets the terminal's SIGINT (a background test session ignores it, and children inherit that).
    """
    out = tmp_path / "out"
    log = tmp_path / "sweep.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "raysfl.cli", "sweep", str(sweep_file), "--out", str(out)],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 240
    try:
        while _recorded_status(out, TRIALS[0]) != "finished":
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "sweep.json did not record the first trial's end in time"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert f"continue with `raysfl sweep {sweep_file} --out {out} --resume`" in text, text[-3000:]
    # not the catch-all's bare line; where the sweep had already stopped when the second Ctrl-C came, it is
    # held while Ray stops, which says so ("raysfl: interrupted; Ray is stopping"; seen in CI, 2026-11-29)
    assert "raysfl: interrupted" not in text.splitlines()


def _faulty_sweep(sweep_file: Path, tmp_path: Path, settings: str, restarts: str) -> Path:
    """A sweep of the tiny scenario whose pool 0 is killed (``settings``), over ``engine.max_restarts``."""
    sweep = tmp_path / "faulty.sweep.toml"
    base = sweep_file.parent / "tiny.toml"
    sweep.write_text(f'base = "{base}"\n[set]\n{settings}\n[grid]\n"engine.max_restarts" = {restarts}\n')
    return sweep


def test_a_failing_trial_is_recorded_and_the_others_go_on(ray_session, sweep_file, tmp_path, capsys):
    sweep = _faulty_sweep(sweep_file, tmp_path, '"engine.kill_pool_at_iteration" = 1', "[0, 1]")
    out = tmp_path / "out"
    assert main(["sweep", str(sweep), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "sweep: trial max_restarts0 failed: RunFailedError:" in err
    assert "gave up after engine.max_restarts = 0" in err
    assert "it has no checkpoint to continue from (engine.checkpoint_every), so run it again" in err
    assert "1 trial(s) failed: max_restarts0" in err
    assert "once their cause is fixed, `--resume` runs them again" in err
    status = json.loads((out / "sweep.json").read_text())["trials"]
    assert (
        status["max_restarts0"]["status"] == "failed" and "RunFailedError" in status["max_restarts0"]["error"]
    )
    assert status["max_restarts1"]["status"] == "finished"
    assert main(["report", str(out), "--out", str(tmp_path / "rep")]) == 0
    assert "skipped" in capsys.readouterr().err
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "max_restarts0`: failed: RunFailedError" in text
    # --resume starts a failed trial without checkpoints over: only raysfl's own outputs go (the whole
    # folder was deleted, with whatever else the user had put in it)
    failed = out / "max_restarts0"
    (failed / "notes.txt").write_text("the user's own file")
    before = (failed / "config.toml").stat().st_mtime_ns
    assert main(["sweep", str(sweep), "--out", str(out), "--resume"]) == 1  # the pool is killed again
    assert (failed / "notes.txt").read_text() == "the user's own file"
    assert (failed / "config.toml").stat().st_mtime_ns != before  # the trial ran again


def test_a_failure_is_in_sweep_json_while_the_sweep_goes_on(sweep_file, tmp_path):
    """The first trial fails; sweep.json records it, with its error, while the second (long) trial still
    runs, so a driver killed then leaves the reason behind, not an "unfinished" trial."""
    sweep = tmp_path / "failing_first.sweep.toml"
    sweep.write_text(
        f'base = "{sweep_file.parent / "tiny.toml"}"\n[set]\n"engine.kill_pool_at_iteration" = 1\n'
        '[link.case]\n"engine.max_restarts" = [0, 1]\n"train.global_iterations" = [3, 400]\n'
        'label = ["fails", "long"]\n'
    )
    out = tmp_path / "out"
    log = tmp_path / "sweep.log"
    proc = _spawn(["sweep", str(sweep), "--out", str(out), "--max-concurrent", "1"], log)
    deadline = time.monotonic() + 240
    try:
        while _recorded_status(out, "fails") != "failed":
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "sweep.json did not record the failure in time"
            time.sleep(0.2)
        assert proc.poll() is None  # the long trial still runs
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    time.sleep(2)  # the orphaned trial processes notice their raylet is gone
    fails = json.loads((out / "sweep.json").read_text())["trials"]["fails"]
    assert fails["error"].startswith("RunFailedError: ") and "engine.max_restarts = 0" in fails["error"]
    assert _recorded_status(out, "long") == "unfinished"


def test_a_failed_trial_continued_as_its_message_says_counts_in_the_report(
    ray_session, sweep_file, tmp_path, capsys
):
    """The failure names the checkpoint and the command; once that command finishes the trial, the report
    counts it, though sweep.json still records the failure."""
    settings = '"engine.kill_pool_at_iteration" = 2\n"engine.checkpoint_every" = 1'
    sweep = _faulty_sweep(sweep_file, tmp_path, settings, "[0]")
    out = tmp_path / "out"
    assert main(["sweep", str(sweep), "--out", str(out)]) == 1
    trial = out / "max_restarts0"
    err = capsys.readouterr().err
    assert re.search(
        rf"continue it from ckpt-\d{{6}}\.pt with `raysfl run --resume {re.escape(str(trial))}`", err
    )
    assert main(["run", "--resume", str(trial), "engine.kill_pool_at_iteration=0"]) == 0
    assert json.loads((out / "sweep.json").read_text())["trials"]["max_restarts0"]["status"] == "failed"
    assert main(["report", str(out), "--out", str(tmp_path / "rep")]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "failed" not in text and "| 1 |" in text
