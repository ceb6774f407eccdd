"""One sweep trial inside Ray Tune: an ordinary raysfl run into ``OUT/<trial>/``, reported to Tune as it goes.

The trial decides from its run directory what to do, which is what makes a sweep resumable whatever
stopped it (Ctrl-C, a SIGKILLed driver, a lost node):

    finished     ``summary.json`` of this scenario, not interrupted → nothing runs; result re-reported
    checkpointed ``checkpoints/ckpt-*.pt`` of this scenario        → continues from the newest checkpoint
    partial      anything else an earlier attempt left              → cleared; the run starts again
    new          no directory                                       → runs

A finished directory or checkpoint of a *different* scenario is never touched: the trial fails naming it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raysfl.scenario import scenario_from_dict


class TrialDirError(RuntimeError):
    """The trial's directory holds the results of another scenario."""


@dataclass(frozen=True)
class TrialTask:
    """What a trial process needs: plain data only (it travels through Ray's object store)."""

    name: str
    scenario: dict[str, Any]  # the resolved scenario (scenario_to_dict)
    out_dir: str  # absolute
    data_dir: str | None  # the sweep's --data-dir, absolute
    cwd: str  # the sweep driver's working directory (relative data paths resolve against it)
    data_env: str | None = None  # the driver's $RAYSFL_DATA, absolute: the trial's, as it is the driver's


class TuneSink:
    """A run sink that reports each evaluation to Ray Tune (global iteration, accuracy, times, bytes), once.

    A trial continued from a checkpoint by a resumed sweep runs in a new Tune run, whose ``result.json`` for
    the trial starts empty: the sink first reports the checkpoint's evaluations, so the file holds the whole
    curve. An attempt restarted after a lost worker repeats evaluations Tune already has: those are skipped.
    """

    def __init__(self, report: Any) -> None:
        self._report = report
        self._seen = 0  # the run's evaluations so far, counted from its start
        self._reported = 0  # how many of them Tune has been given

    def on_event(self, row: Mapping[str, Any]) -> None:
        """Events are not reported to Tune (the run's own events.parquet has them)."""

    def on_eval(self, row: dict[str, Any]) -> None:
        """One Tune result per evaluation not reported before."""
        self._seen += 1
        if self._seen > self._reported:
            self._report(tune_metrics(row))
            self._reported = self._seen

    def resume(self, state: Any, evals: list[dict[str, Any]]) -> None:
        """Report the evaluations Tune lacks; the run goes on after ``evals`` (none: it starts again)."""
        self._seen = len(evals)
        for row in evals[self._reported :]:
            self._report(tune_metrics(row))
        self._reported = max(self._reported, self._seen)

    def close(self) -> None:
        """Nothing to flush."""


def tune_metrics(row: dict[str, Any]) -> dict[str, Any]:
    """The Tune result of one ``metrics.parquet`` row: iteration, accuracy, loss, emulated/wall s, bytes.

    Example:
        >>> tune_metrics({"iteration": 3, "t": 12.5, "wall_s": 4.0, "accuracy": 0.5, "loss": 1.2,
        ...               "bytes_up": 10, "bytes_down": 20})["emulated_s"]
        12.5
    """
    out: dict[str, Any] = {"global_iteration": int(row.get("iteration", 0))}
    for key in ("accuracy", "loss"):  # Tune's progress table shows the first few columns: these first
        value = row.get(key)
        if value is not None and math.isfinite(float(value)):
            out[key] = float(value)
    out["emulated_s"] = float(row.get("t", 0.0))
    out["wall_s"] = float(row.get("wall_s", 0.0))
    out["bytes_up"] = int(row.get("bytes_up", 0) or 0)
    out["bytes_down"] = int(row.get("bytes_down", 0) or 0)
    return out


def stored_scenario(out: Path) -> dict[str, Any] | None:
    """The resolved scenario a run stored in ``out/config.toml`` (without its run facts), if there is one.

    Read as the run's output (:func:`raysfl.run_files.read_config`, without the device table), not as a
    scenario file: a run of 10,000 clients stores a device row per client (about 1.5 MB), over
    :data:`raysfl.config.MAX_FILE_BYTES`, the cap of a scenario file.

    Raises:
        RunDirError: the file does not read as TOML (naming it).
    """
    from raysfl.run_files import read_config

    if not (out / "config.toml").is_file():
        return None
    doc = read_config(out)
    for key in ("run", "devices"):
        doc.pop(key, None)
    return doc


def same_trial_scenario(stored: dict[str, Any], planned: dict[str, Any]) -> bool:
    """Whether a run's stored scenario is the planned trial's: the same results and the same setting.

    The checkpoint fingerprint (:func:`raysfl.engine.checkpoint.same_scenario`) leaves out engine options
    a resumed run may change (another machine's threads, a GPU); a sweep's trial is also defined by the
    options a report groups by (``engine.clock``, ``engine.memory_format``, thread counts, ...; all but
    :data:`raysfl.report.runs.IGNORED`) and its seed.
    """
    from raysfl.engine.checkpoint import same_scenario

    return same_scenario(stored, planned) and not setting_differences(stored, planned)


def setting_differences(stored: dict[str, Any], planned: dict[str, Any]) -> list[str]:
    """The keys a report groups by, and the seed, in which ``stored`` (as now read) and ``planned`` differ."""
    from raysfl.engine.checkpoint import current_form
    from raysfl.report.runs import IGNORED, differing_fields

    return differing_fields([current_form(stored) or stored, planned], [k for k in IGNORED if k != "seed"])


def trial_state(out: Path, scenario_doc: dict[str, Any]) -> str:
    """``"new"``, ``"finished"``, ``"checkpointed"`` or ``"partial"`` (module docstring).

    Raises:
        TrialDirError: ``out`` holds a finished run or checkpoints of another scenario.
    """
    from raysfl.engine.checkpoint import checkpoint_files, differences, finished_summary

    if not out.exists():
        return "new"
    stored = stored_scenario(out)
    has_results = (out / "summary.json").is_file() or checkpoint_files(out / "checkpoints")
    if stored is not None and has_results and not same_trial_scenario(stored, scenario_doc):
        found = differences(stored, scenario_doc) or setting_differences(stored, scenario_doc)
        diff = "; ".join(found[:4])
        raise TrialDirError(
            f"{out} holds a run of another scenario ({diff}); nothing was changed in it. Use another --out "
            "for this sweep, or remove that directory."
        )
    if finished_summary(out) is not None:  # a damaged summary.json is no finished run
        return "finished"
    if checkpoint_files(out / "checkpoints"):
        return "checkpointed"
    return "partial"


def run_trial(config: dict[str, Any], tasks: dict[str, TrialTask]) -> None:
    """The Tune function trainable: run (or continue, or skip) the trial named by ``config["trial"]``."""
    from ray import tune

    from raysfl.engine.runner import clear_outputs, run

    task = tasks[config["trial"]]
    if os.path.isdir(task.cwd):
        os.chdir(task.cwd)
    if task.data_env:  # a worker on another node may not have the driver's environment
        os.environ["RAYSFL_DATA"] = task.data_env
    out = Path(task.out_dir)
    state = trial_state(out, task.scenario)
    if state == "finished":  # Tune's result.json for it starts empty in this Tune run: the whole curve
        rows = _metrics_rows(out)
        for row in rows:
            tune.report(tune_metrics(row))
        if not rows:
            tune.report({"global_iteration": 0})
        return
    if state == "partial":  # a run stopped before anything to continue from: only its own outputs go
        clear_outputs(out)
    sc = scenario_from_dict(task.scenario)
    summary = run(
        sc,
        out,
        data_dir=task.data_dir,
        resume=state == "checkpointed",
        extra_sinks=[TuneSink(tune.report)],
    )
    if summary["interrupted"]:
        raise KeyboardInterrupt(f"trial {task.name} was interrupted")


def _metrics_rows(out: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    path = out / "metrics.parquet"
    return pq.read_table(path).to_pylist() if path.is_file() else []
