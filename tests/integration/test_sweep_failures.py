"""`raysfl sweep` when trials fail or the user interrupts it: failures are recorded while the others go on,
the messages say how to continue, and a continued trial counts in the report.

The tiny synthetic sweep of :mod:`tests.integration.tiny_sweep`; a trial takes seconds.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from raysfl.cli import main
from tests.integration.tiny_sweep import TRIALS, recorded_status, spawn


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
        while recorded_status(out, TRIALS[0]) != "finished":
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
    proc = spawn(["sweep", str(sweep), "--out", str(out), "--max-concurrent", "1"], log)
    deadline = time.monotonic() + 240
    try:
        while recorded_status(out, "fails") != "failed":
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
    assert recorded_status(out, "long") == "unfinished"


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
