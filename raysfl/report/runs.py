"""Finished runs on disk, grouped by everything except the seed: what ``raysfl report`` aggregates.

A run directory (:mod:`raysfl.engine.runner`) holds ``config.toml`` (the resolved scenario),
``metrics.parquet`` (one row per evaluation) and, once it finished, ``summary.json``. Runs whose scenarios
differ only in ``seed`` and in what never changes a number form one :class:`Group`: :data:`IGNORED` (the
names, the outputs, the paper values, where the data are read from, and the engine options the engine
guarantees the same numbers under), the options declared diagnostic (:func:`comparable`) and those the run
left unread (:func:`mark_unused`). The engine options that do change numbers (``precision``,
``memory_format``, ``flush_denormal``, thread counts, ``server_device``, ``clock``) split groups. A
group's *method* is its ``[algorithm]`` table; its *setting* is everything else, so a report draws one
figure per setting with one line per method.
"""

from __future__ import annotations

import copy
import functools
import glob
import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from raysfl.metrics.divergence import diverged
from raysfl.run_files import RunDirError, printable, read_config, read_metrics, read_summary

IGNORED = (
    "name",
    "description",
    "seed",
    "metrics",
    "reference",
    "data.data_dir",
    "data.download",
    # Same numbers on any number of pools and placements, with or without checkpoints and restarts:
    "engine.pools",
    "engine.clients_per_pool",
    "engine.placement",
    "engine.max_inflight",
    "engine.checkpoint_every",
    "engine.keep_checkpoints",
    "engine.max_restarts",
    "engine.kill_pool_at_iteration",
)
"""Scenario sections and dotted keys that never change a run's numbers; runs differing in nothing else
(and the seed) are one group."""
UNUSED = "<unused>"
"""What a report reads for an option its run never read (``data.alpha`` of an iid split): see
:func:`mark_unused`."""
SWEEP_STATUS = "sweep.json"  # a sweep's status file, written by raysfl.sweep.execute
X_AXES = ("emulated", "iteration", "bytes", "wall")


@dataclass(frozen=True)
class Run:
    """One finished run: its scenario (as written), its evaluation rows and its summary."""

    path: Path
    scenario: dict[str, Any]
    rows: tuple[dict[str, Any], ...]
    summary: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)  # config.toml's [run]: version, commit, data source

    @property
    def seed(self) -> int:
        """The scenario seed."""
        return int(self.scenario.get("seed", 0))

    def curve(self, x: str, metric: str = "accuracy") -> tuple[np.ndarray, np.ndarray]:
        """(x values, finite ``metric`` values) of the evaluations; ``x`` is one of :data:`X_AXES`."""
        pts = [(x_value(r, x), float(r[metric])) for r in self.rows if is_finite(r.get(metric))]
        xs = np.array([p[0] for p in pts], dtype=float)
        ys = np.array([p[1] for p in pts], dtype=float)
        return xs, ys

    def final(self, metric: str = "accuracy") -> float | None:
        """The run's last evaluation of ``metric`` (for accuracy: ``summary.json``'s final accuracy)."""
        return self._summarised(metric, "final_accuracy", lambda ys: ys[-1])

    def end(self, metric: str = "accuracy", last: int = 0) -> float | None:
        """Where the run ended in ``metric``: its final value, or its last-``last`` mean when ``last`` > 0.

        The per-seed cells, the last-K column and the pairings all read this (:func:`tail_mean`).
        """
        return tail_mean(self.curve("iteration", metric)[1], last) if last > 0 else self.final(metric)

    def best(self, metric: str = "accuracy") -> float | None:
        """The run's highest evaluation of ``metric`` (for accuracy: ``summary.json``'s best accuracy)."""
        return self._summarised(metric, "best_accuracy", np.max)

    def recorded(self, key: str) -> float | None:
        """``summary.json``'s number ``key`` (``bytes_up``, ``wall_s``, ...); ``None`` where it records none.

        A summary written before a key existed lacks it; a mean over runs counts only those that have it,
        never the others as 0.
        """
        value = self.summary.get(key)
        return float(value) if is_finite(value) else None

    def _summarised(self, metric: str, key: str, pick: Callable[[np.ndarray], Any]) -> float | None:
        """``summary.json``'s ``key`` for the model's accuracy, else ``pick`` of ``metric``'s evaluations."""
        if metric == "accuracy":
            value = self.summary.get(key)
            return None if value is None else float(value)
        ys = self.curve("iteration", metric)[1]
        return float(pick(ys)) if len(ys) else None


@dataclass
class Group:
    """Runs that differ only in their seed."""

    key: str
    scenario: dict[str, Any]  # of the first run, seed removed
    runs: list[Run] = field(default_factory=list)

    @property
    def method(self) -> dict[str, Any]:
        """The ``[algorithm]`` table (name and params) shared by the group."""
        return dict(self.scenario.get("algorithm", {}))

    @property
    def setting(self) -> dict[str, Any]:
        """Everything but the method: dataset, partition, model, system, federation, training."""
        return {k: v for k, v in self.scenario.items() if k != "algorithm"}

    @property
    def reference(self) -> dict[str, Any]:
        """The scenario's ``[reference]`` table (paper numbers), of the first run."""
        return dict(self.runs[0].scenario.get("reference", {})) if self.runs else {}


def accuracy_columns(runs: Sequence[Run]) -> list[str]:
    """The evaluation columns named ``*accuracy`` that hold a value in some run: ``--metric``'s choices.

    ``accuracy`` is the model's test accuracy; CSE-FSL also logs ``aux_accuracy`` (client part + head).

    Example:
        >>> run = Run(Path("r"), {}, ({"accuracy": 0.5, "aux_accuracy": None, "loss": 1.2},), {})
        >>> accuracy_columns([run])
        ['accuracy']
    """
    found = {
        k
        for run in runs
        for row in run.rows
        for k, v in row.items()
        if k.endswith("accuracy") and v is not None
    }
    return sorted(found)


def x_value(row: dict[str, Any], x: str) -> float:
    """A metrics row's position on axis ``x``: emulated s, global iteration, MiB up + down, or wall s.

    Example:
        >>> x_value({"t": 5.0, "iteration": 2, "bytes_up": 2**20, "bytes_down": 2**20}, "bytes")
        2.0
    """
    if x == "emulated":
        return float(row["t"])
    if x == "iteration":
        return float(row["iteration"])
    if x == "bytes":
        return (int(row.get("bytes_up") or 0) + int(row.get("bytes_down") or 0)) / 2**20
    if x == "wall":
        return float(row.get("wall_s") or 0.0)
    raise ValueError(f"x axis {x!r}: choose one of {', '.join(X_AXES)}")


def is_finite(value: Any) -> TypeGuard[float]:
    """Whether ``value`` is a number other than NaN or ±inf (``None``: no)."""
    return value is not None and math.isfinite(float(value))


def target_text(target: float) -> str:
    """A target accuracy (a fraction) as the percent it is: ``0.6`` → ``60 %``, ``0.255`` → ``25.5 %``.

    A whole percent would name another threshold than the one applied.
    """
    return f"{100 * target:.6g} %"


def canonical(doc: Any) -> str:
    """A text that is equal for equal documents (sorted keys)."""
    return json.dumps(doc, sort_keys=True, default=str)


def _ignored(key: str, ignore: Sequence[str]) -> bool:
    """Whether dotted ``key`` is one of ``ignore`` or lies in a section ``ignore`` names."""
    return any(key == i or key.startswith(i + ".") for i in ignore)


def mark_unused(scenario: dict[str, Any]) -> dict[str, Any]:
    """A copy of a run's scenario with each option its other values leave unread set to :data:`UNUSED`.

    An iid run's ``data.alpha``, a fixed link's ``radius_m`` or GAS's ``la_tau`` without logit adjustment
    (declared with ``option(applies=...)``, :func:`raysfl.scenario.unread_options`) changes nothing, so runs
    that differ only there are one group and a label does not name it.
    """
    marked = copy.deepcopy(scenario)
    for dotted in _unread(canonical(scenario)):
        table, name = _table_of(marked, dotted)
        if table is not None and name in table:
            table[name] = UNUSED
    return marked


def _table_of(doc: dict[str, Any], dotted: str) -> tuple[dict[str, Any] | None, str]:
    """The table of ``doc`` that holds dotted key ``dotted`` (``None``: there is none), and the key's name."""
    *sections, name = dotted.split(".")
    table: Any = doc
    for section in sections:
        table = table.get(section) if isinstance(table, dict) else None
    return (table if isinstance(table, dict) else None), name


def comparable(scenario: dict[str, Any]) -> dict[str, Any]:
    """A run's scenario as a report compares it: :func:`mark_unused`, without its diagnostic options.

    A diagnostic option (GAS's ``dissimilarity_every``, declared ``option(diagnostic=True)``) only adds
    measurements, so runs with and without it are one group and a label does not name it.
    """
    marked = mark_unused(scenario)
    algorithm = scenario.get("algorithm")
    name = algorithm.get("name") if isinstance(algorithm, dict) else None
    for dotted in _diagnostic(None if name is None else str(name)):
        table, key = _table_of(marked, dotted)
        if table is not None:
            table.pop(key, None)
    return marked


@functools.lru_cache(maxsize=256)
def _diagnostic(algorithm: str | None) -> tuple[str, ...]:
    """:func:`raysfl.scenario.diagnostic_keys` of a scenario of the algorithm named ``algorithm``.

    The list depends on nothing else (``None``: the scenario names none, so the default algorithm's).
    """
    from raysfl.scenario import diagnostic_keys  # imports torch: only when a report is made

    return tuple(diagnostic_keys({} if algorithm is None else {"algorithm": {"name": algorithm}}))


@functools.lru_cache(maxsize=4096)
def _unread(scenario: str) -> tuple[str, ...]:
    """:func:`raysfl.scenario.unread_options` of a scenario given as its :func:`canonical` text.

    Cached: a report asks for each run's more than once (its seed's repeats, its group, its label).
    """
    from raysfl.scenario import unread_options  # imports torch: only when a report is made

    return tuple(unread_options(json.loads(scenario)))


def group_key(scenario: dict[str, Any]) -> str:
    """What runs of one group share: the scenario less the seed, :data:`IGNORED` and unread options.

    An option the scenario's other values leave unread counts as :data:`UNUSED` (:func:`mark_unused`); a
    diagnostic option is left out (:func:`comparable`).
    """
    marked = comparable(scenario)
    return canonical({k: v for k, v in _flatten(marked).items() if not _ignored(k, IGNORED)})


def _read_run(path: Path) -> Run:
    """The run in ``path``; raises :class:`RunDirError` naming a damaged file."""
    config = read_config(path)
    info = config.pop("run", {})
    config.pop("devices", None)
    return Run(path, config, tuple(read_metrics(path)), read_summary(path), info)


def sweep_trials(folder: Path) -> dict[str, dict[str, Any]]:
    """The trials a sweep's ``sweep.json`` lists in ``folder`` (empty when it is not a sweep)."""
    status = folder / SWEEP_STATUS
    if not status.is_file():
        return {}
    try:
        trials = json.loads(status.read_text()).get("trials", {})
    except (json.JSONDecodeError, AttributeError):
        return {}
    return trials if isinstance(trials, dict) else {}


def method_axis_labels(trial: dict[str, Any]) -> dict[str, str]:
    """The link labels of a ``sweep.json`` trial that name its method: those of axes setting ``algorithm``.

    A labelled axis over the data (``[link.data] label = ["s2", "a0.1"]``) names a setting, not a method,
    so its labels are left out. Trials recorded without ``label_keys`` (earlier raysfl) keep every label.

    Example:
        >>> trial = {"labels": {"method": "mc", "data": "s2"},
        ...          "label_keys": {"method": ["algorithm.name"], "data": ["data"]}}
        >>> method_axis_labels(trial)
        {'method': 'mc'}
    """
    labels = trial.get("labels")
    if not isinstance(labels, dict):
        return {}
    keys = trial.get("label_keys")
    if not isinstance(keys, dict):
        return dict(labels)

    def sets_method(axis: str) -> bool:
        return any(k == "algorithm" or str(k).startswith("algorithm.") for k in keys.get(axis, ()))

    return {axis: label for axis, label in labels.items() if sets_method(axis)}


def _candidates(
    path: Path, sweeps: dict[Path, dict[str, dict[str, Any]]], seen: set[str] | None = None
) -> Iterable[Path]:
    """Run directories at or below ``path`` (those holding config.toml), skipping Tune's own folder.

    A sweep's trials come in its file's order (``sweep.json``, read into ``sweeps`` for the caller), so a
    report lists methods and settings as the sweep file names them; other folders come after them, by name.
    Links are followed, and a folder reached again (``seen``: real paths) is not walked again: links back
    up the tree, or several to one folder at each level, made the walk endless or exponential.
    """
    seen = set() if seen is None else seen
    real = os.path.realpath(path)
    if real in seen:
        return
    seen.add(real)
    if (path / "config.toml").is_file():
        yield path
        return
    sweeps[path] = sweep_trials(path)
    for child in ordered_children(path, sweeps[path]):
        yield from _candidates(child, sweeps, seen)


def ordered_children(folder: Path, trials: dict[str, Any] | None = None) -> list[Path]:
    """``folder``'s subfolders: a sweep's trials in its file's order, then the others by name.

    ``trials`` is the folder's ``sweep.json`` trials (read when not given); Tune's own and hidden folders
    are left out.
    """
    rank = {name: i for i, name in enumerate(sweep_trials(folder) if trials is None else trials)}
    children = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))]
    return sorted(children, key=lambda p: (rank.get(p.name, len(rank)), p.name))


def unfinished_trials(
    folder: Path, present: Iterable[Path] = (), trials: dict[str, Any] | None = None
) -> list[tuple[Path, str]]:
    """The trials ``folder``'s ``sweep.json`` lists as failed or not run, each with its reason.

    Trials with a folder among ``present`` are left out (their folder tells); a failed trial's reason is its
    recorded error. ``trials``: the ``sweep.json`` trials when already read.
    """
    seen = set(present)
    return [
        (folder / name, _failure(trial) if trial.get("status") == "failed" else "not run")
        for name, trial in (sweep_trials(folder) if trials is None else trials).items()
        if folder / name not in seen and trial.get("status") != "finished"
    ]


def error_head(message: str) -> str:
    """The first line of a failed trial's recorded error, saying how many more ``sweep.json`` keeps."""
    head, _, rest = printable(message).partition("\n")
    return head + (f" [{len(rest.splitlines())} more lines in {SWEEP_STATUS}]" if rest else "")


def _failure(trial: dict[str, Any]) -> str:
    """A failed sweep trial's reason, as the report lists it."""
    return f"failed: {error_head(str(trial.get('error', '')))}".rstrip(": ")


def why_not_finished(
    run_dir: Path, trial: dict[str, Any] | None, *, interrupted_counts: bool = False
) -> str | None:
    """Why ``run_dir`` is not a finished run (``None`` when it is one).

    With ``interrupted_counts``, a run stopped on Ctrl-C after writing its summary is one. The folder
    decides: a trial that ``sweep.json`` records as failed and that was finished since (``raysfl run
    --resume`` of its folder) counts; a failed trial's recorded error is the reason when it did not.
    """
    failed = _failure(trial) if trial is not None and trial.get("status") == "failed" else None
    summary = run_dir / "summary.json"
    if not summary.is_file():
        return failed or "unfinished (no summary.json)"
    try:
        if read_summary(run_dir).get("interrupted") and not interrupted_counts:
            return failed or "interrupted"
    except RunDirError as err:
        return str(err)
    if not (run_dir / "metrics.parquet").is_file():
        return failed or "no metrics.parquet"
    return None


def finished_run_dirs(
    root: Path, *, interrupted_counts: bool = False
) -> tuple[list[tuple[Path, dict[str, Any] | None]], list[tuple[Path, str]]]:
    """The finished runs at or below ``root``, and every run left out with why.

    Each finished run directory comes with its sweep trial (``None`` outside a sweep); the others
    (unfinished, interrupted, failed) with the reason. ``interrupted_counts``: a run stopped on Ctrl-C
    counts as finished (``compare`` lists it, marked). Every sweep folder walked, at any depth, also names
    the trials that failed or never ran before writing anything. Shared by ``raysfl report`` and ``raysfl
    compare``, so both find the same runs.
    """
    finished: list[tuple[Path, dict[str, Any] | None]] = []
    skipped: list[tuple[Path, str]] = []
    seen: set[Path] = set()
    sweeps: dict[Path, dict[str, dict[str, Any]]] = {}  # the folders walked, each sweep.json read once
    for run_dir in _candidates(root, sweeps):
        seen.add(run_dir)
        parent = sweeps.get(run_dir.parent)
        trial = (sweep_trials(run_dir.parent) if parent is None else parent).get(run_dir.name)
        reason = why_not_finished(run_dir, trial, interrupted_counts=interrupted_counts)
        if reason is None:
            finished.append((run_dir, trial))
        else:
            skipped.append((run_dir, reason))
    for folder, trials in sweeps.items():
        skipped += unfinished_trials(folder, seen, trials)
    return finished, skipped


def parse_method_labels(specs: Sequence[str]) -> list[tuple[str, list[Path]]]:
    """``--label NAME=DIR`` entries of ``raysfl report``: each name with the directories whose runs it names.

    A run's method is named by its sweep's link labels; runs made outside a sweep folder (a rerun of one
    seed, say) have none and are named by their algorithm. ``NAME=DIR`` names every run at or below ``DIR``
    ``NAME`` instead. ``DIR`` may be a glob pattern (``runs/sweep/fedbuff_code_*``), expanded here.

        >>> parse_method_labels([])
        []

    Raises:
        ValueError: naming ``--label``, for an entry without ``=``, an empty name, or a ``DIR`` that names
            no directory.
    """
    parsed: list[tuple[str, list[Path]]] = []
    for spec in specs:
        name, sep, pattern = spec.partition("=")
        name = name.strip()
        if not sep or not name or not pattern:
            raise ValueError(f"--label: {spec!r} is not NAME=DIR (e.g. fedbuff_code=runs/rerun)")
        dirs = sorted(Path(p) for p in glob.glob(pattern) if Path(p).is_dir())
        if not dirs:
            raise ValueError(f"--label: {pattern!r} ({name}) names no directory")
        parsed.append((name, [d.resolve() for d in dirs]))
    return parsed


def _given_label(run_dir: Path, labels: Sequence[tuple[str, list[Path]]]) -> str | None:
    """The ``--label`` name of the run in ``run_dir``, if any (:func:`parse_method_labels`)."""
    where = run_dir.resolve()
    names = {name for name, dirs in labels if any(d == where or d in where.parents for d in dirs)}
    if len(names) > 1:
        raise ValueError(f"--label: the run in {run_dir} is named {' and '.join(sorted(names))}; give it one")
    return names.pop() if names else None


def find_runs(
    paths: Sequence[str | Path], labels: Sequence[str] = ()
) -> tuple[list[Run], list[tuple[Path, str]]]:
    """The finished runs under ``paths`` and, for every run left out (unfinished, failed), why.

    A sweep's output directory also names the trials that failed before writing anything. ``labels`` are
    ``NAME=DIR`` entries (:func:`parse_method_labels`) that name the method of the runs under ``DIR``,
    over any sweep's link labels.

    Raises:
        FileNotFoundError: a path that does not exist.
        ValueError: a ``labels`` entry that is malformed, names a run twice, or names none of the runs.
    """
    given = parse_method_labels(labels)
    named: set[str] = set()
    runs: list[Run] = []
    skipped: list[tuple[Path, str]] = []
    for item in paths:
        root = Path(item)
        if not root.is_dir():
            raise FileNotFoundError(f"{root}: no such directory")
        finished, left_out = finished_run_dirs(root)
        for run_dir, trial in finished:
            try:
                run = _read_run(run_dir)
            except RunDirError as err:
                skipped.append((run_dir, str(err)))
                continue
            own = _given_label(run_dir, given)
            axis_labels = {"method": own} if own else method_axis_labels(trial or {})
            if axis_labels:
                run.info["labels"] = axis_labels  # the sweep's (or --label's) names for this run's method
            if own:
                named.add(own)
            runs.append(run)
        skipped += left_out
    unused = [name for name, _ in given if name not in named]
    if unused:
        raise ValueError(f"--label: {', '.join(unused)} names none of the finished runs under the DIRs given")
    return runs, skipped


def one_run_per_seed(runs: Sequence[Run]) -> tuple[list[Run], list[tuple[Path, str]]]:
    """The runs with each (group, seed) once, and the repeats left out, each with the run it repeats.

    Statistics are over seeds: a second run of a setting's seed (a sweep run twice into two folders, or a
    folder given twice) is not another sample. The first run found is kept, in the order of ``runs``.
    """
    kept: list[Run] = []
    first: dict[tuple[str, int], Run] = {}
    repeats: list[tuple[Path, str]] = []
    for run in runs:
        key = (group_key(run.scenario), run.seed)
        if key not in first:
            first[key] = run
            kept.append(run)
        elif run.path.resolve() == first[key].path.resolve():
            repeats.append((run.path, "found twice under the given paths: counted once"))
        else:
            kept_run = first[key]
            same = _same_numbers(run, kept_run)
            differs = "" if same else f" (its numbers differ: {_differs(run, kept_run)})"
            repeats.append(
                (run.path, f"the same setting and seed {run.seed} as {kept_run.path}: counted once{differs}")
            )
    return kept, repeats


def _same_numbers(a: Run, b: Run) -> bool:
    """Whether two runs logged the same evaluations (wall time aside, NaN equal to NaN): a true repeat."""

    def values(run: Run) -> list[dict[str, Any]]:
        nan = "nan"  # NaN != NaN: two identical diverged runs would differ
        return [
            {k: nan if isinstance(v, float) and math.isnan(v) else v for k, v in r.items() if k != "wall_s"}
            for r in run.rows
        ]

    return values(a) == values(b)


def _differs(run: Run, kept: Run) -> str:
    """How a repeat's evaluations differ from the kept run's, in a few words."""
    if len(run.rows) != len(kept.rows):
        return f"{len(run.rows)} evaluations against {len(kept.rows)}"
    a, b = run.final(), kept.final()
    if a != b:
        show = [("-" if v is None else f"{100 * v:.2f} %") for v in (a, b)]
        return f"final accuracy {show[0]} against {show[1]}"
    return "other evaluations"


def group_runs(runs: Sequence[Run]) -> list[Group]:
    """Runs grouped by :func:`group_key`, in the order their first run appears."""
    groups: dict[str, Group] = {}
    for run in runs:
        key = group_key(run.scenario)
        if key not in groups:
            doc = {k: v for k, v in comparable(run.scenario).items() if k != "seed"}
            groups[key] = Group(key, doc)
        groups[key].runs.append(run)
    return list(groups.values())


def _flatten(doc: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(doc, dict) and doc:
        out: dict[str, Any] = {}
        for k, v in doc.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): doc}


def differing_fields(docs: Sequence[dict[str, Any]], ignore: Iterable[str] = IGNORED) -> list[str]:
    """Dotted keys whose value is not the same in every document (ignoring ``ignore`` sections and keys).

    Example:
        >>> differing_fields([{"a": {"x": 1, "y": 2}}, {"a": {"x": 1, "y": 3}}])
        ['a.y']
    """
    skip = tuple(ignore)
    flat = [{k: v for k, v in _flatten(d).items() if not _ignored(k, skip)} for d in docs]
    keys = sorted(set().union(*flat)) if flat else []
    return [k for k in keys if len({canonical(f.get(k, "<unset>")) for f in flat}) > 1]


def label(doc: dict[str, Any], keys: Sequence[str], drop_prefix: str = "") -> str:
    """``key=value`` for each of ``keys`` in ``doc`` (``algorithm.name`` shown as its bare value).

    A key the run left unread (:data:`UNUSED`) is not shown.
    """
    flat = _flatten(doc)
    parts = []
    for key in keys:
        value = flat.get(key, "<unset>")
        if value == UNUSED:
            continue
        if key == "algorithm.name":
            parts.append(str(value))
        else:
            short = key[len(drop_prefix) :] if drop_prefix and key.startswith(drop_prefix) else key
            parts.append(f"{short}={value}")
    return ", ".join(parts)


def finite_values(values: Iterable[float | None]) -> list[float]:
    """The values :func:`mean_std` averages: numbers other than ``None``, NaN and ±inf."""
    return [float(v) for v in values if is_finite(v)]


def mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (ddof = 1; ``None`` for fewer than two values).

    Example:
        >>> mean_std([1.0, 3.0])
        (2.0, 1.4142135623730951)
    """
    vals = finite_values(values)
    if not vals:
        return None, None
    mean = math.fsum(vals) / len(vals)  # exactly rounded: the same for the same values in any order
    if len(vals) < 2:
        return mean, None
    var = math.fsum((v - mean) ** 2 for v in vals) / (len(vals) - 1)
    return mean, math.sqrt(var)


def diverged_at(run: Run) -> int | None:
    """The global iteration of the run's first evaluation whose test loss is NaN or infinite, else None.

    From there on the run evaluates a broken model (accuracy at chance or below), not a slow one; a report
    names such runs, since their accuracies still count in its means.
    """
    return next((int(row["iteration"]) for row in run.rows if diverged(row)), None)


def tail_mean(accuracies: Sequence[float] | np.ndarray, last: int) -> float | None:
    """Mean of the last ``last`` accuracies of one run (all of them when it has fewer; None when none).

    Example:
        >>> tail_mean([0.1, 0.4, 0.5, 0.6], 2)
        0.55
    """
    tail = [float(a) for a in list(accuracies)[-last:]]
    return math.fsum(tail) / len(tail) if tail else None  # exactly rounded: equal tails tie exactly


def first_reaching(xs: np.ndarray, ys: np.ndarray, target: float) -> float | None:
    """The x of the first evaluation with accuracy ≥ ``target``; ``None`` when none reaches it.

    Example:
        >>> first_reaching(np.array([0.0, 30.0, 60.0]), np.array([0.1, 0.55, 0.71]), 0.6)
        60.0
    """
    hits = np.nonzero(ys >= target)[0]
    return float(xs[hits[0]]) if hits.size else None


def mean_curve(curves: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, ...]:
    """(x, mean, min, max) of several seeds' accuracy curves on one x grid.

    The grid is every x any seed evaluated at from the largest first x of all seeds to the smallest last
    x (so every seed has a value there, none held beyond its own evaluations); each curve is linearly
    interpolated onto it. With identical x values (global iterations) this is the plain mean, min and max
    of the seeds' evaluations. Seeds whose evaluations do not overlap give an empty grid.
    """
    curves = [(x, y) for x, y in curves if len(x)]
    if not curves:
        empty = np.array([], dtype=float)
        return empty, empty, empty, empty
    start = max(float(x[0]) for x, _ in curves)
    end = min(float(x[-1]) for x, _ in curves)
    grid = np.unique(np.concatenate([x[(x >= start) & (x <= end)] for x, _ in curves]))
    values = np.stack([np.interp(grid, x, y) for x, y in curves])
    return grid, values.mean(axis=0), values.min(axis=0), values.max(axis=0)
