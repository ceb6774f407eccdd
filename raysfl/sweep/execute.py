"""Run a sweep's trials through Ray Tune, resume it, and record what became of each trial.

Layout of a sweep's output directory ``OUT``:

    OUT/sweep.json       the plan (sweep file, every trial with its overrides and resources) and each
                         trial's status: finished | failed (with its error message) | unfinished
    OUT/<trial>/         one ordinary raysfl run directory per trial (config.toml, metrics.parquet, tb/, ...)
    OUT/_tune/           Ray Tune's experiment: its state, per-trial result.json and progress.csv
                         (written for Tune's tools; raysfl reads nothing from it)

Trials run as Tune function trainables (:func:`raysfl.sweep.trial.run_trial`), each reserving the
placement group of :func:`raysfl.sweep.resources.trial_resources`. ``--resume`` starts a new Tune run over
the trials not yet finished, in the plan's order (:func:`trials_to_run`); each continues from its own run
directory (from its last checkpoint, or from the start), so the sweep goes on exactly where it stopped and
in the order the sweep file promises (seeds as the outer axis: a sweep stopped part-way holds every method of
its first seeds). Tune's experiment restore is not used: it starts the pending trials in another order.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sys
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raysfl.engine.checkpoint import finished_summary
from raysfl.engine.runner import _finite
from raysfl.report.runs import SWEEP_STATUS, error_head
from raysfl.safe_write import replace_text
from raysfl.scenario import scenario_to_dict
from raysfl.sweep.resources import TrialResources, trial_resources
from raysfl.sweep.spec import Sweep, Trial
from raysfl.sweep.trial import TrialTask

TUNE_NAME = "_tune"


class SweepStateError(RuntimeError):
    """The output directory holds another sweep, or a sweep that needs ``--resume`` (a user error)."""


@dataclass(frozen=True)
class SweepResult:
    """What became of every trial; ``failed`` maps a trial to its error message."""

    out: Path
    finished: list[str]
    failed: dict[str, str]
    unfinished: list[str]


def local_resources() -> dict[str, float]:
    """This machine's CPUs and GPUs as an embedded Ray would see them, without starting Ray."""
    import torch

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return {"CPU": float(cpus), "GPU": float(torch.cuda.device_count())}


def plan(
    sweep: Sweep,
    cluster: dict[str, Any],
    trial_cpus: float | None = None,
    nodes: Sequence[tuple[float, float]] | None = None,
) -> list[tuple[str, dict[str, Any], TrialResources]]:
    """(trial name, its assignments, its resources) for every trial, in the order Tune starts them.

    ``trial_cpus``: the CPUs each trial reserves in all (``--trial-cpus``; :func:`trial_resources`).
    ``nodes``: each node's (CPUs, GPUs), which every trial must fit node by node; default one node holding
    all of ``cluster`` (this machine).
    """
    if nodes is None:
        nodes = [(float(cluster.get("CPU", 0.0)), float(cluster.get("GPU", 0.0)))]
    return [
        (t.name, dict(t.assignments), trial_resources(t.scenario, cluster, trial_cpus, nodes))
        for t in sweep.trials
    ]


def dry_run_text(
    sweep: Sweep,
    cluster: dict[str, Any],
    out: Path,
    max_concurrent: int | None,
    trial_cpus: float | None = None,
    nodes: Sequence[tuple[float, float]] | None = None,
    to_run: Collection[str] | None = None,
) -> str:
    """The ``--dry-run`` listing: every trial, what it sets, its run directory and its resource request.

    ``nodes``: the cluster's nodes (:func:`plan`); default this machine. ``to_run``: the trials a
    ``--resume`` would run (:func:`resume_plan`); the others are listed as finished. Default: all.
    """
    rows = plan(sweep, cluster, trial_cpus, nodes)
    running = [row for row in rows if to_run is None or row[0] in to_run]
    fits = [int(cluster.get("CPU", 0) / r.cpus + 1e-6) if r.cpus else 0 for _, _, r in running]
    at_once = min(max(1, min(fits)), len(running)) if fits else 0
    if max_concurrent:
        at_once = min(at_once, max_concurrent)
    gpus = f", {cluster.get('GPU', 0):g} GPU" if cluster.get("GPU") else ""
    done = len(rows) - len(running)
    resumed = f"; {done} finished, {len(running)} to run" if to_run is not None else ""
    lines = [
        f"sweep {sweep.name}: {len(rows)} trial{'' if len(rows) == 1 else 's'} of {sweep.base.name}, into "
        f"{out}/<trial>/{resumed}"
        + ("" if sweep.axes else " (the file has no [grid] or [link] axis: one run of the base with [set])"),
        f"cluster: {cluster.get('CPU', 0):g} CPU{gpus}; at most {at_once} trial(s) at a time",
    ]
    note = trial_cpus_note(trial_cpus, cluster)
    if note:
        lines.append(note)
    if sweep.settings:
        lines.append("set on every trial: " + ", ".join(f"{k} = {v!r}" for k, v in sweep.settings.items()))
    for name, assigned, res in rows:
        what = ", ".join(f"{k} = {v!r}" for k, v in assigned.items()) or "(the base scenario)"
        if to_run is not None and name not in to_run:
            lines.append(f"  {name} [finished, not run again]: {what}")
            continue
        lines.append(f"  {name}: {what}")
        lines.append(f"      resources: {res.describe()}")
    return "\n".join(lines)


def trial_cpus_note(trial_cpus: float | None, cluster: dict[str, Any]) -> str | None:
    """What ``--trial-cpus`` above the cluster's CPUs becomes (each trial reserves them all), or ``None``.

    Example:
        >>> trial_cpus_note(100, {"CPU": 2.0})
        'note: --trial-cpus 100 is more than the 2 CPUs here; each trial reserves 2, one trial at a time'
    """
    available = float(cluster.get("CPU", 0.0))
    if trial_cpus is None or available <= 0 or trial_cpus <= available:
        return None
    return (
        f"note: --trial-cpus {trial_cpus:g} is more than the {available:g} CPUs here; each trial reserves "
        f"{available:g}, one trial at a time"
    )


def _trial_entries(sweep: Sweep) -> dict[str, dict[str, Any]]:
    """Each trial's entry in ``sweep.json`` but its resources: what it computes, known without Ray."""
    from raysfl.engine.checkpoint import fingerprint

    keys = {axis.name: list(axis.keys) for axis in sweep.axes}
    return {
        t.name: {
            "fingerprint": fingerprint(_finite(scenario_to_dict(t.scenario))),
            # the resolved scenario: a later raysfl (new options, renamed keys) can resolve it again
            "scenario": _finite(scenario_to_dict(t.scenario)),
            "set": {k: v for k, v in t.assignments},
            "labels": dict(t.labels),  # the link axes' own names for this trial (reports use them)
            # what each labelled axis sets: a report names methods by the axes that set [algorithm] keys
            "label_keys": {axis: keys[axis] for axis, _ in t.labels},
        }
        for t in sweep.trials
    }


def _plan_doc(sweep: Sweep, rows: list[tuple[str, dict[str, Any], TrialResources]]) -> dict[str, Any]:
    trials = _trial_entries(sweep)
    for t, (_, _, res) in zip(sweep.trials, rows, strict=True):
        trials[t.name]["bundles"] = list(res.bundles)
    return {"sweep": str(sweep.path), "name": sweep.name, "base": str(sweep.base), "trials": trials}


def check_out(out: Path, resume: bool, trials: Sequence[str] = ()) -> None:
    """Refuse an ``--out`` that holds a sweep (without ``resume``) or none to resume (with it).

    Needs no Ray, so a wrong ``--out`` is refused before Ray starts.

    ``--resume`` accepts an empty ``out`` (a sweep stopped before it wrote anything), but not a path that
    does not exist: a mistyped ``--out`` would otherwise run the whole sweep again. A new sweep is refused
    where a folder of one of its ``trials`` exists already: it would take that folder's run for the trial,
    or start it over there.

    Raises:
        SweepStateError: naming ``out`` and what to do instead.
    """
    if out.exists() and not out.is_dir():
        raise SweepStateError(f"--out {out} is a file, not a directory; choose another --out")
    if out.is_dir():
        _refuse_links_in_tune_folder(out / TUNE_NAME)
    taken = [name for name in trials if (out / name).exists()]
    if not resume and taken and not (out / SWEEP_STATUS).is_file():
        raise SweepStateError(
            f"{out} already holds folders named as this sweep's trials ({', '.join(taken[:4])}"
            + (", ..." if len(taken) > 4 else "")
            + "); nothing was changed in it. Choose another --out (the default is a new folder under runs/)."
        )
    if not (out / SWEEP_STATUS).is_file():
        if resume and not out.exists():
            raise SweepStateError(
                f"--resume: {out} does not exist; name the sweep's output directory, or start the sweep "
                "without --resume"
            )
        if resume and any(out.iterdir()):
            raise SweepStateError(f"--resume: {out} holds no sweep ({SWEEP_STATUS} is missing)")
        return
    if not resume:
        raise SweepStateError(
            f"{out} already holds a sweep; nothing was changed in it. Continue it with --resume, or pick "
            "another --out."
        )


def _refuse_links_in_tune_folder(tune_dir: Path) -> None:
    """Refuse a Tune folder holding a symbolic link, before Tune writes in it.

    Tune rewrites its files there (``tuner.pkl``, each trial's ``params.json`` and ``result.json``) and
    would write through a link planted in a sweep folder received from someone else.

    Raises:
        SweepStateError: naming the first link found and where it points.
    """
    link = str(tune_dir) if tune_dir.is_symlink() else None
    pending = [str(tune_dir)] if link is None and tune_dir.is_dir() else []
    while pending and link is None:  # iterative: a folder nested thousands deep is no RecursionError
        folder = pending.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in sorted(entries, key=lambda e: e.name):
                    if entry.is_symlink():
                        link = entry.path
                        break
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
        except OSError as err:  # a folder it cannot list could hide a link
            raise SweepStateError(
                f"cannot check {folder} for links ({err.strerror or err}); Ray Tune writes in "
                f"{tune_dir.name}/. Make it readable, or remove the {tune_dir.name} folder (raysfl reads "
                "nothing from it), and run the sweep again."
            ) from None
    if link is not None:
        raise SweepStateError(
            f"{link} is a symbolic link (to {os.readlink(link)}); Ray Tune rewrites the files in "
            f"{tune_dir.name}/ and would write through it. Remove the link (or the whole {tune_dir.name} "
            "folder: raysfl reads nothing from it) and run the sweep again."
        )


def _check_same_sweep(out: Path, plan_doc: dict[str, Any]) -> None:
    """On ``--resume``: refuse a sweep file that no longer plans the trials recorded in ``out``."""
    status = out / SWEEP_STATUS
    if not status.is_file():
        return
    old = read_status(status).get("trials", {})
    new = plan_doc["trials"]
    added = [n for n in new if n not in old]
    dropped = [n for n in old if n not in new]
    changed = [n for n in new if n in old and not _same_trial(old[n], new[n], out / n)]
    if added or dropped or changed:
        parts = [f"new trials: {_some(added)}"] if added else []
        parts += [f"trials it no longer plans: {_some(dropped)}"] if dropped else []
        if changed:
            keys = _changed_keys(old[changed[0]], new[changed[0]], out / changed[0])
            detail = f" ({changed[0]} differs in {', '.join(keys[:6])})" if keys else ""
            parts.append(f"trials that differ: {_some(changed)}{detail}")
        more = " (new trials, such as more seeds, can run into another --out; `raysfl report` takes both)"
        raise SweepStateError(
            f"--resume: the sweep file no longer describes the sweep in {out}: {'; '.join(parts)}. Resume "
            f"with the sweep file (and --seeds) it was started with, or use another --out"
            f"{more if added else ''}."
        )


def _some(names: list[str], shown: int = 6) -> str:
    """Up to ``shown`` trial names, and how many more."""
    rest = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + rest


def _changed_keys(old: dict[str, Any], new: dict[str, Any], run_dir: Path) -> list[str]:
    """The keys in which a recorded trial and the planned one differ, as far as the record says."""
    from raysfl.engine.checkpoint import current_form, differences
    from raysfl.sweep.trial import setting_differences

    recorded = old.get("scenario") or _readable_stored_scenario(run_dir)
    if recorded is not None:
        now = current_form(recorded) or recorded
        results = {line.split(":")[0] for line in differences(now, new["scenario"])}
        return sorted(results | set(setting_differences(recorded, new["scenario"])))
    was, now = old.get("set", {}), json.loads(json.dumps(new["set"]))
    return sorted(k for k in set(was) | set(now) if was.get(k) != now.get(k))


def _same_trial(old: dict[str, Any], new: dict[str, Any], run_dir: Path) -> bool:
    """Whether a trial recorded in ``sweep.json`` (``old``) is the planned trial ``new``.

    The recorded scenario, or the one the trial's run stored in its ``config.toml``, is the planned one
    (:func:`raysfl.sweep.trial.same_trial_scenario`: the same results and the same setting, in today's
    schema); a trial of an older ``sweep.json`` that never started has neither, and counts as the same when
    its fingerprint or the values the sweep file sets for it are.
    """
    from raysfl.sweep.trial import same_trial_scenario

    recorded = old.get("scenario") or _readable_stored_scenario(run_dir)
    if recorded is not None:
        return same_trial_scenario(recorded, new["scenario"])
    if old.get("fingerprint") == new["fingerprint"]:
        return True
    return old.get("set") == json.loads(json.dumps(new["set"]))


MAX_ERROR_CHARS = 4000


def _root_cause(err: BaseException) -> str:
    """The user-facing message of a trial's error: its innermost cause's type and whole message.

    The whole message, not its first line: a missing dataset's error lists the places searched on the
    lines after it (``sweep.json`` keeps it, capped at :data:`MAX_ERROR_CHARS`; the terminal shows the
    first line, :func:`raysfl.report.runs.error_head`).
    """
    seen = err
    while (cause := getattr(seen, "cause", None)) is not None and cause is not seen:  # RayTaskError chains
        seen = cause
    if seen is err and err.__cause__ is not None:
        seen = err.__cause__
    text = "\n".join(line.rstrip() for line in str(seen).strip().splitlines()).strip()
    if len(text) > MAX_ERROR_CHARS:
        text = text[:MAX_ERROR_CHARS] + " [...]"
    return f"{type(seen).__name__}: {text}" if text else type(seen).__name__


def _trial_status(out: Path, name: str, planned: dict[str, Any] | None = None) -> str:
    """``finished`` when the trial's ``summary.json`` says it ended; else ``unfinished``.

    With the ``planned`` scenario, a finished run of another scenario is ``unfinished`` too: the trial, run
    again, fails naming the difference (a damaged summary is unfinished as well).
    """
    from raysfl.run_files import RunDirError
    from raysfl.sweep.trial import same_trial_scenario, stored_scenario

    if finished_summary(out / name) is None:
        return "unfinished"
    try:
        stored = stored_scenario(out / name)
    except RunDirError:  # a damaged config.toml: run again, the trial then fails naming the file
        return "unfinished"
    if planned is None or stored is None:
        return "finished"
    return "finished" if same_trial_scenario(stored, planned) else "unfinished"


def _readable_stored_scenario(run_dir: Path) -> dict[str, Any] | None:
    """The trial's stored scenario, ``None`` when it has none or it is damaged (its trial reports that)."""
    from raysfl.run_files import RunDirError
    from raysfl.sweep.trial import stored_scenario

    try:
        return stored_scenario(run_dir)
    except RunDirError:
        return None


def resume_plan(sweep: Sweep, out: Path) -> list[str]:
    """The trials ``--resume`` into ``out`` would run: the unfinished ones, in the plan's order.

    Needs no Ray. Refuses what :func:`check_out` refuses and a sweep file that no longer plans the trials
    recorded there (:class:`SweepStateError`). An ``out`` without ``sweep.json`` (stopped before it wrote
    one) runs every trial.
    """
    names = [t.name for t in sweep.trials]
    check_out(out, True, names)
    entries = _trial_entries(sweep)
    _check_same_sweep(out, {"trials": entries})
    if not (out / SWEEP_STATUS).is_file():
        return names
    planned = {name: entry["scenario"] for name, entry in entries.items()}
    return trials_to_run(names, out, True, planned)


def trials_to_run(
    names: list[str], out: Path, resume: bool, planned: dict[str, dict[str, Any]] | None = None
) -> list[str]:
    """The trials a run of the sweep starts, in the plan's order: all, or (``resume``) the unfinished ones.

    ``planned``: each trial's scenario; a finished run of another scenario in a trial's folder is no
    finished trial (run again, the trial fails naming the difference).
    """
    scenarios = planned or {}
    return [n for n in names if not resume or _trial_status(out, n, scenarios.get(n)) != "finished"]


class StatusFile:
    """``OUT/sweep.json``: the plan with every trial's status, rewritten whole each time a trial ends.

    A trial's ``summary.json`` is read until it says the trial finished; from then on the status is
    remembered, so each finished trial's summary is read once (every rewrite had read every summary:
    n²/2 reads for a sweep of n trials).
    """

    def __init__(self, out: Path, plan_doc: dict[str, Any]) -> None:
        self.out = out
        self.plan_doc = plan_doc
        self.failed: dict[str, str] = {}  # trial name -> its error (:func:`_root_cause`)
        self._finished: set[str] = set()

    def _status(self, name: str) -> str:
        planned = self.plan_doc["trials"].get(name, {}).get("scenario")
        if name not in self._finished and _trial_status(self.out, name, planned) == "finished":
            self._finished.add(name)
        return "finished" if name in self._finished else "unfinished"

    def write(self) -> SweepResult:
        """Record every trial's status (a failed trial's with its error); return them."""
        doc = json.loads(json.dumps(self.plan_doc))
        for name, entry in doc["trials"].items():
            entry["status"] = self._status(name)
            if entry["status"] != "finished" and name in self.failed:
                entry["status"], entry["error"] = "failed", self.failed[name]
        # whole or not at all, should the driver be killed meanwhile; never through a link
        replace_text(self.out / SWEEP_STATUS, status_text(doc))
        trials = doc["trials"]
        return SweepResult(
            self.out,
            finished=[n for n, t in trials.items() if t["status"] == "finished"],
            failed={n: t["error"] for n, t in trials.items() if t["status"] == "failed"},
            unfinished=[n for n, t in trials.items() if t["status"] == "unfinished"],
        )


def check_trials_data(trials: Sequence[Trial], data_dir: str | None) -> None:
    """Refuse, before Ray starts, a sweep whose trials' datasets this machine can neither find nor fetch.

    Each distinct data section is checked once, as a run's driver would look for it
    (:func:`raysfl.data.load.check_reachable`, with ``--data-dir``); on a cluster the trials run where
    the data may be, so :func:`run_sweep` checks only a sweep that runs here.

    Raises:
        raysfl.data.DataError: the first unreachable dataset, its message naming every searched place.
    """
    from raysfl.data.load import check_reachable

    for data in dict.fromkeys(t.scenario.data for t in trials):
        check_reachable(data, data_dir)


def run_sweep(
    sweep: Sweep,
    out: Path,
    *,
    address: str | None = None,
    max_concurrent: int | None = None,
    resume: bool = False,
    data_dir: str | None = None,
    verbose: int = 1,
    trial_cpus: float | None = None,
) -> SweepResult:
    """Run (or ``resume``) every trial of ``sweep`` through Ray Tune into ``out``; see the module docstring.

    ``max_concurrent`` caps the trials that run at once (default: as many as the cluster's resources fit).
    ``trial_cpus`` is the CPUs each trial reserves in all (default: its actors' threads, scaled down to fit
    the cluster; :func:`raysfl.sweep.resources.trial_resources`); it changes how many trials run at once,
    never what a trial computes.
    A trial that fails is recorded with its error and the others go on.
    """
    import ray
    from ray import tune

    from raysfl.engine.cluster import alive_nodes, ensure_ray
    from raysfl.sweep.trial import run_trial

    out = out.resolve()
    names = [t.name for t in sweep.trials]
    if resume:  # before Ray starts: a changed sweep file is refused, a finished sweep has nothing to run
        to_run = resume_plan(sweep, out)
        if not to_run:
            _record_all_finished(out)
            return SweepResult(out, finished=names, failed={}, unfinished=[])
    else:
        check_out(out, resume, names)
        to_run = names
    if address is None:  # this machine runs every trial: data it cannot reach fails them all
        check_trials_data([t for t in sweep.trials if t.name in to_run], data_dir)
    ensure_ray(address)
    cluster = {k: float(v) for k, v in ray.cluster_resources().items()}
    note = trial_cpus_note(trial_cpus, cluster)
    if note and verbose:
        print(note, file=sys.stderr)
    rows = plan(sweep, cluster, trial_cpus, alive_nodes())
    plan_doc = _plan_doc(sweep, rows)
    out.mkdir(parents=True, exist_ok=True)
    status = StatusFile(out, plan_doc)
    status.write()
    data_env = os.environ.get("RAYSFL_DATA")
    tasks = {
        t.name: TrialTask(
            name=t.name,
            scenario=_finite(scenario_to_dict(t.scenario)),
            out_dir=str(out / t.name),
            data_dir=str(Path(data_dir).resolve()) if data_dir else None,
            data_env=str(Path(data_env).resolve()) if data_env else None,
            cwd=os.getcwd(),
        )
        for t in sweep.trials
    }
    bundles = {name: [dict(b) for b in res.bundles] for name, _, res in rows}

    def resources(config: dict[str, Any]) -> tune.PlacementGroupFactory:
        return tune.PlacementGroupFactory(bundles[config["trial"]], strategy="PACK")

    trainable = tune.with_resources(tune.with_parameters(run_trial, tasks=tasks), resources)
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")  # no Tune TensorBoard files beside ours
    planned = {name: entry["scenario"] for name, entry in plan_doc["trials"].items()}
    todo = trials_to_run(names, out, resume, planned)
    if not todo:
        return status.write()
    with tune_noise_filtered():
        grid = _new_tuner(trainable, todo, out, max_concurrent, verbose, _status_keeper(status)).fit()
    for i in range(len(grid)):
        result = grid[i]
        if result.error is not None and result.config:
            status.failed[result.config["trial"]] = _root_cause(result.error)
    return status.write()


FLOAT_TAG = "float"  # sweep.json writes an infinite or NaN number as {"float": "-inf"}: JSON has none


def status_text(doc: Any) -> str:
    """``sweep.json``'s text: standard JSON, each infinite or NaN number written as ``{"float": "-inf"}``.

    JSON has no such numbers (Python writes a non-standard ``-Infinity`` that other readers refuse), and
    ``system.link.tx_power_dbm``'s default is -inf; :func:`read_status` reads the tagged numbers back.

    Example:
        >>> status_text({"tx_power_dbm": float("-inf"), "ratio": 5.0}).split()
        ['{', '"tx_power_dbm":', '{', '"float":', '"-inf"', '},', '"ratio":', '5.0', '}']
    """

    def encode(obj: Any) -> Any:
        if isinstance(obj, float) and not math.isfinite(obj):
            return {FLOAT_TAG: "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")}
        if isinstance(obj, dict):
            return {k: encode(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [encode(v) for v in obj]
        return obj

    return json.dumps(encode(doc), indent=2, allow_nan=False) + "\n"


def read_status(path: Path) -> dict[str, Any]:
    """``sweep.json`` with its tagged numbers (:func:`status_text`) numbers again.

    A file written by an earlier raysfl, with ``-Infinity``, reads the same.
    """

    def decode(obj: Any) -> Any:
        if isinstance(obj, dict):
            if obj.keys() == {FLOAT_TAG} and obj[FLOAT_TAG] in ("inf", "-inf", "nan"):
                return float(obj[FLOAT_TAG])
            return {k: decode(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [decode(v) for v in obj]
        return obj

    return decode(json.loads(path.read_text()))


def _record_all_finished(out: Path) -> None:
    """Mark every trial of ``sweep.json`` finished, keeping the rest (the resources it was planned with).

    A driver killed after a trial's summary but before its status write had left that trial unfinished.
    """
    doc = read_status(out / SWEEP_STATUS)
    trials = doc.get("trials", {})
    if all(entry.get("status") == "finished" for entry in trials.values()):
        return
    for entry in trials.values():
        entry["status"] = "finished"
        entry.pop("error", None)
    replace_text(out / SWEEP_STATUS, status_text(doc))


TUNE_NOISE = {
    "ray.tune.tune": "Tuner.restore(",
    "ray.tune.analysis.experiment_analysis": "Failed to fetch metrics",
}
"""Tune's log lines a sweep drops, by logger: a text each such line holds.

On ^C Tune advises "Resume experiment with: Tuner.restore(...)"; a sweep continues with ``raysfl sweep
--resume`` instead (:func:`print_outcome` says so; Tune's restore starts pending trials in another order).
It then warns "Failed to fetch metrics" for each trial that never started (no Tune progress file); the
sweep's own summary names the unfinished trials, and raysfl reads its runs' own files, never Tune's.
"""


def _without_tune_noise(record: logging.LogRecord) -> bool:
    """Whether a Tune log line is kept: it holds none of :data:`TUNE_NOISE`'s texts."""
    message = record.getMessage()
    return not any(text in message for text in TUNE_NOISE.values())


@contextlib.contextmanager
def tune_noise_filtered() -> Iterator[None]:
    """Drop the lines of :data:`TUNE_NOISE` from Tune's loggers while the block runs."""
    loggers = [logging.getLogger(name) for name in TUNE_NOISE]
    for log in loggers:
        log.addFilter(_without_tune_noise)
    try:
        yield
    finally:
        for log in loggers:
            log.removeFilter(_without_tune_noise)


def _status_keeper(status: StatusFile) -> Any:
    """A Tune callback that rewrites ``sweep.json`` whenever a trial ends, a failed one with its error.

    So the file says which trials finished, and why others failed, even when the driver is killed.
    """
    from ray import tune

    class KeepStatus(tune.Callback):
        def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
            status.write()

        def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
            status.failed[str(trial.config["trial"])] = _trial_error(trial)
            status.write()

    return KeepStatus()


def _trial_error(trial: Any) -> str:
    """The error a failed Tune trial recorded, as :func:`_root_cause` states it (its text if not pickled).

    Read from the trial's local files, which Tune writes before it calls back (its storage copy comes later).
    """
    import pickle

    pickled = trial.pickled_error_file
    if pickled and os.path.isfile(pickled):
        try:
            with open(pickled, "rb") as f:
                return _root_cause(pickle.load(f))  # noqa: S301 - Tune's own file, written by this driver
        except Exception:  # noqa: BLE001 - an error that does not unpickle: its text below
            pass
    text = Path(trial.error_file).read_text() if trial.error_file and os.path.isfile(trial.error_file) else ""
    lines = text.strip().splitlines()
    return lines[-1][:MAX_ERROR_CHARS] if lines else "the trial failed without recording an error"


def _new_tuner(
    trainable: Any, names: list[str], out: Path, max_concurrent: int | None, verbose: int, keeper: Any
) -> Any:
    from ray import tune
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    def trial_name(trial: Any) -> str:
        return str(trial.config["trial"])

    return tune.Tuner(
        trainable,
        param_space={"trial": tune.grid_search(names)},
        tune_config=tune.TuneConfig(
            max_concurrent_trials=max_concurrent,
            # A trial's process keeps torch and raysfl imported for the next trial of the same resource
            # request: saves ~2 s of process start and imports per trial (benchmarks/sweep_overhead.py).
            reuse_actors=True,
            trial_name_creator=trial_name,
            trial_dirname_creator=trial_name,
        ),
        run_config=tune.RunConfig(
            name=TUNE_NAME,
            storage_path=str(out),
            failure_config=tune.FailureConfig(max_failures=0),
            callbacks=[JsonLoggerCallback(), CSVLoggerCallback(), keeper],
            verbose=verbose,
        ),
    )


@dataclass(frozen=True)
class SweepCommand:
    """How ``raysfl sweep`` was started: the options its ``--resume`` command repeats."""

    sweep_path: str
    trial_cpus: float | None = None
    address: str | None = None
    data_dir: str | None = None
    max_concurrent: int | None = None
    seeds: Sequence[int] | None = None

    def resume(self, out: Path) -> str:
        """The command that continues the sweep in ``out``, with the options that change where or how."""
        return (
            f"raysfl sweep {self.sweep_path} --out {out} --resume"
            + (f" --seeds {','.join(map(str, self.seeds))}" if self.seeds is not None else "")
            + (f" --trial-cpus {self.trial_cpus:g}" if self.trial_cpus is not None else "")
            + (f" --max-concurrent {self.max_concurrent}" if self.max_concurrent else "")
            + (f" --data-dir {self.data_dir}" if self.data_dir else "")
            + (f" --address {self.address}" if self.address else "")
        )


def print_outcome(result: SweepResult, command: SweepCommand) -> int:
    """Print what became of the trials; the exit status (0 all finished, 1 some failed, 130 unfinished).

    The command it suggests for unfinished trials repeats ``--seeds``, ``--trial-cpus``,
    ``--max-concurrent``, ``--data-dir`` and ``--address`` when the sweep was given them.
    """
    print(f"sweep: {len(result.finished)} trial(s) finished, outputs in {result.out}")
    for name, error in result.failed.items():
        print(f"sweep: trial {name} failed: {error_head(error)}", file=sys.stderr)
    if result.failed:
        print(
            f"sweep: {len(result.failed)} trial(s) failed: {', '.join(result.failed)} (details in "
            f"{result.out / SWEEP_STATUS}); once their cause is fixed, `--resume` runs them again",
            file=sys.stderr,
        )
    if result.unfinished:
        print(
            f"sweep: {len(result.unfinished)} trial(s) unfinished: {', '.join(result.unfinished)}; "
            f"continue with `{command.resume(result.out)}`",
            file=sys.stderr,
        )
    if result.failed:
        return 1
    return 130 if result.unfinished else 0


def print_interrupted(out: Path, command: SweepCommand) -> int:
    """After a Ctrl-C that ended the sweep at once (a second one, while Tune saved its state): what to do.

    Each trial is an ordinary run with its own checkpoints, so ``--resume`` continues from them whatever Tune
    saved. Without a ``sweep.json`` in ``out`` the sweep had not started its trials: nothing to continue.
    """
    if not (out / SWEEP_STATUS).is_file():
        print("sweep: interrupted before any trial started", file=sys.stderr)
        return 130
    print(
        f"sweep: interrupted; finished trials and the others' checkpoints are kept in {out.resolve()}; "
        f"continue with `{command.resume(out.resolve())}`",
        file=sys.stderr,
    )
    return 130
