"""``raysfl report``: a markdown table of grouped runs (mean ± std over seeds) and the figures it embeds.

One row per group of runs that differ only in their seed (:mod:`raysfl.report.runs`):

    n                 runs in the group (seeds)
    final / best acc  mean ± sample std over the seeds, in % ("(k/n)" after a cell over fewer seeds: a run
                      without evaluations of the metric; one seed: its value, no ±)
    last-K acc        with ``--last K``: each run's mean accuracy over its last K evaluations, then mean ± std
                      over the seeds (a steadier end point than the final evaluation for methods whose
                      accuracy swings between evaluations, e.g. FedBuff under non-IID data)
    paper acc         the scenario's ``[reference]`` accuracy (± std) — a paper value, never measured here
    to target         the x (emulated s by default) of the first evaluation at or above ``--target``,
                      mean ± std over the seeds that reach it, and how many of them did
    MiB up / down     mean over seeds of the bytes sent up (clients → server) and down
    wall s            mean ± std of the runs' wall-clock time (these three, like the accuracies, over the
                      runs whose summary records them, "(k/n)" when that is fewer than all)

and, per setting, a per-seed table (one cell per method and seed: the run's last-K or final accuracy and
its x at the target, so a claim "in every seed" can be read off), with ``--paired METHOD`` (repeatable)
the other methods' per-seed differences to METHOD, or with ``--paired "METHOD vs BASELINE"`` only that
pair's (:mod:`raysfl.report.paired`), and PNG figures of the metric against emulated time, global
iteration and MiB transferred (and wall time when ``--x wall``), named ``<metric>_<x>_<n>.png`` and embedded
in ``report.md``; beside them ``runs.csv``, each counted run's values at full precision
(:mod:`raysfl.report.run_table`), so that later seeds combine with these exactly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from raysfl.report.figures import AXIS_TITLES, accuracy_figure, save
from raysfl.report.paired import paired_table, parse_pairings
from raysfl.report.run_table import RUNS_FILE, run_table, write_run_table
from raysfl.report.runs import (
    Group,
    Run,
    accuracy_columns,
    canonical,
    differing_fields,
    diverged_at,
    find_runs,
    finite_values,
    first_reaching,
    group_runs,
    label,
    mean_std,
    one_run_per_seed,
    target_text,
)
from raysfl.safe_write import refuse_link, replace_text

REPORT_FILE = "report.md"
UNITS = {"emulated": "emulated s", "iteration": "iterations", "bytes": "MiB", "wall": "wall s"}


@dataclass(frozen=True)
class GroupStats:
    """The numbers of one report row."""

    n: int
    final: tuple[float | None, float | None]
    best: tuple[float | None, float | None]
    last: tuple[float | None, float | None]
    counted: dict[str, int]  # "final", "best", "last", "up", "down", "wall": the seeds each mean is over
    to_target: tuple[float | None, float | None]
    reached: int
    mib_up: float | None  # over the runs whose summary records bytes (counted["up"] / ["down"])
    mib_down: float | None
    wall: tuple[float | None, float | None]


@dataclass(frozen=True)
class Report:
    """What ``report`` wrote: the markdown path, the figures, the groups and the skipped runs."""

    path: Path
    figures: list[Path]
    groups: list[Group]
    skipped: list[tuple[Path, str]]
    warnings: list[str] = field(default_factory=list)  # e.g. a --paired method that paired with nothing
    runs_csv: Path | None = None  # the per-run values at full precision (:mod:`raysfl.report.run_table`)


def group_stats(
    group: Group, target: float | None, x: str = "emulated", last: int = 0, metric: str = "accuracy"
) -> GroupStats:
    """Mean ± std over the group's seeds (module docstring); ``target`` is an accuracy in [0, 1].

    ``last`` > 0 adds the mean over each run's last ``last`` evaluations (:func:`tail_mean`). ``metric``
    is the evaluation column the accuracy columns read (``accuracy``, or e.g. ``aux_accuracy``).
    """
    runs = group.runs
    finals = [r.final(metric) for r in runs]
    bests = [r.best(metric) for r in runs]
    tails = [r.end(metric, last) for r in runs] if last > 0 else []
    hits: list[float] = []
    if target is not None:
        for r in runs:
            hit = first_reaching(*r.curve(x, metric), target)
            if hit is not None:
                hits.append(hit)
    ups, downs, walls = ([r.recorded(key) for r in runs] for key in ("bytes_up", "bytes_down", "wall_s"))
    columns = {"final": finals, "best": bests, "last": tails, "up": ups, "down": downs, "wall": walls}
    return GroupStats(
        n=len(runs),
        counted={k: len(finite_values(v)) for k, v in columns.items()},
        final=mean_std(finals),
        best=mean_std(bests),
        last=mean_std(tails),
        to_target=mean_std(hits),
        reached=len(hits),
        mib_up=_mib(ups),
        mib_down=_mib(downs),
        wall=mean_std(walls),
    )


def _mib(sent: Sequence[float | None]) -> float | None:
    """The mean of the runs' recorded byte counts in MiB, over the runs that record one."""
    counts = finite_values(sent)
    return sum(counts) / len(counts) / 2**20 if counts else None


def _over(counted: int, n: int) -> str:
    """`` (k/n)`` after a mean over k of the group's n seeds; nothing when it is over all of them."""
    return f" ({counted}/{n})" if counted < n else ""


def x_text(value: float, x: str) -> str:
    """A position on axis ``x`` in a per-seed cell: whole iterations, else one decimal (as the table)."""
    return f"{value:.0f}" if x == "iteration" else f"{value:.1f}"


def seed_cell(run: Run, target: float | None, x: str, last: int, metric: str = "accuracy") -> str:
    """One run's cell of the per-seed table: accuracy % (last-K mean, else final) and its x at the target.

    Example: ``"72.19 / 681.3"``; "—" for a target the run never reached; the accuracy alone without a
    target.
    """
    xs, accs = run.curve(x, metric)
    acc = run.end(metric, last)
    text = "-" if acc is None else f"{100 * float(acc):.2f}"
    if target is None:
        return text
    hit = first_reaching(xs, accs, target)
    return f"{text} / {'—' if hit is None else x_text(hit, x)}"


def per_seed_table(
    members: Sequence[Group],
    names: Sequence[str],
    target: float | None,
    x: str,
    last: int,
    metric: str = "accuracy",
) -> list[str]:
    """Markdown rows of one setting's per-seed table (:func:`seed_cell`), seeds as columns in order."""
    seeds = sorted({r.seed for g in members for r in g.runs})
    short = metric_label(metric)
    what = f"last-{last} {short} %" if last > 0 else f"final {short} %"
    if target is not None:
        what += f" / {UNITS[x]} to {target_text(target)}"
    lines = [f"Per seed ({what}):", "", "| method | " + " | ".join(f"seed {s}" for s in seeds) + " |"]
    lines.append("|---|" + "---|" * len(seeds))
    for g, name in zip(members, names, strict=True):
        by_seed = {r.seed: seed_cell(r, target, x, last, metric) for r in g.runs}
        lines.append(f"| {name} | " + " | ".join(by_seed.get(s, "") for s in seeds) + " |")
    return lines


def metric_label(metric: str) -> str:
    """The short name of an evaluation column in headers: ``acc`` for accuracy, else the column name."""
    return "acc" if metric == "accuracy" else metric


def _pm(stat: tuple[float | None, float | None], scale: float = 1.0, digits: int = 2) -> str:
    mean, std = stat
    if mean is None:
        return "-"
    text = f"{scale * mean:.{digits}f}"
    return text + (f" ± {scale * std:.{digits}f}" if std is not None else "")


def _paper(group: Group) -> str:
    ref = group.reference
    if "accuracy" not in ref:
        return "-"
    text = f"{float(ref['accuracy']):.2f}" + (f" ± {float(ref['std']):.2f}" if "std" in ref else "")
    return text + (f" ({ref['source']})" if ref.get("source") else "")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:60] or "all"


def write_report(
    paths: Sequence[str | Path],
    out_dir: str | Path,
    *,
    target: float | None = None,
    x: str = "emulated",
    command: str = "",
    last: int = 0,
    paired: Sequence[str] = (),
    metric: str = "accuracy",
    labels: Sequence[str] = (),
) -> Report:
    """Group the finished runs under ``paths``; write ``out_dir/report.md`` and its figures.

    ``last`` > 0 adds a column with the mean accuracy over each run's last ``last`` evaluations.
    ``paired`` names methods (labels of the report's method column): each setting then gets the other
    methods' per-seed differences to each of them, or, for an entry ``"METHOD vs BASELINE"``, METHOD's
    difference to BASELINE only (:func:`raysfl.report.paired.parse_pairings`). ``metric`` is the
    evaluation column every accuracy column, table and figure reads: ``accuracy`` (the model's test
    accuracy) or another ``*accuracy`` column, such as CSE-FSL's ``aux_accuracy``; runs without it are
    skipped. ``labels`` (``NAME=DIR``) name the method of the runs under ``DIR``, as a sweep's link labels
    do (:func:`raysfl.report.runs.parse_method_labels`).

    Raises:
        FileNotFoundError: a path that does not exist.
        ValueError: a ``labels`` entry that is malformed or names no run, or no finished run was found
            (the message lists what was skipped and why), or a ``paired`` name is not one of the methods'
            labels, or ``metric`` is not an accuracy column of the runs (the messages list the choices).
    """
    if x not in UNITS:
        raise ValueError(f"--x: {x!r} is not an axis; choose one of {', '.join(UNITS)}")
    if last < 0:
        raise ValueError(f"--last: {last} must be >= 1 (evaluations at the end of each run)")
    runs, skipped = find_runs(paths, labels)
    if not runs:
        why = "; ".join(f"{p}: {reason}" for p, reason in skipped[:8])
        raise ValueError(
            f"no finished runs under {', '.join(map(str, paths))}" + (f" ({why})" if why else "")
        )
    runs, skipped = _with_metric(runs, skipped, metric)
    runs, repeats = one_run_per_seed(runs)
    skipped += repeats
    groups = group_runs(runs)
    docs = [g.scenario for g in groups]
    varying = differing_fields(docs)
    non_method = [k for k in varying if not k.startswith("algorithm.")]
    setting_keys, bound_keys = split_varying_keys(groups, non_method)
    method_names = method_labels(groups, bound_keys)
    algorithms = {method_names[id(g)]: str(g.method.get("name", "")) for g in groups}
    pairings = parse_pairings(paired, list(method_names.values()), algorithms)
    settings: dict[str, list[Group]] = {}
    for g in groups:
        settings.setdefault(label(g.setting, setting_keys) or "all runs", []).append(g)
    out = Path(out_dir)
    refuse_link(out, "the figures of an earlier report")
    out.mkdir(parents=True, exist_ok=True)
    axes = [x] + [a for a in ("emulated", "iteration", "bytes") if a != x]
    figures: list[Path] = []
    lines = [f"# Report: {len(runs)} runs in {len(groups)} groups", ""]
    if command:
        lines += [f"Made by `{command}`.", ""]
    lines += _provenance(runs) + _datasets(runs)
    target_col = f"{UNITS[x]} to {target_text(target)} (reached)" if target is not None else None
    short = metric_label(metric)
    head = ["setting", "method", "n", f"final {short} %", f"best {short} %"]
    head += [f"last-{last} {short} %"] if last else []
    paper = metric == "accuracy"  # the [reference] numbers are the papers' model accuracies
    head += ["paper acc %"] if paper else []
    head += [target_col] if target_col else []
    head += ["MiB up", "MiB down", "wall s"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    unrecorded = False  # a MiB or wall cell over fewer runs than the group's
    for setting_label, members in settings.items():
        for g in members:
            st = group_stats(g, target, x, last, metric)
            unrecorded |= min(st.counted["up"], st.counted["down"], st.counted["wall"]) < st.n
            row = [setting_label, method_names[id(g)], str(st.n)]
            row += [_pm(st.final, 100) + _over(st.counted["final"], st.n)]
            row += [_pm(st.best, 100) + _over(st.counted["best"], st.n)]
            row += [_pm(st.last, 100) + _over(st.counted["last"], st.n)] if last else []
            row += [_paper(g)] if paper else []
            if target_col:
                row.append(f"{_pm(st.to_target, 1, 1)} ({st.reached}/{st.n})")
            row += [_pm((st.mib_up, None), 1, 1) + _over(st.counted["up"], st.n)]
            row += [_pm((st.mib_down, None), 1, 1) + _over(st.counted["down"], st.n)]
            row += [_pm(st.wall, 1, 1) + _over(st.counted["wall"], st.n)]
            lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "Mean ± sample standard deviation over seeds; paper values are the scenarios' `[reference]`.",
    ]
    if not paper:
        lines[-1] = (
            f"Mean ± sample standard deviation over seeds of each run's {metric}; no paper column: "
            "the scenarios' `[reference]` numbers are model accuracies."
        )
    if last:
        lines[-1] += f" Last-{last} {short}: each run's mean over its last {last} evaluations."
    if target_col and target is not None:
        lines[-1] += (
            f" {UNITS[x].capitalize()} to {target_text(target)}: over the seeds that reached it, which the "
            "count in brackets gives; a seed that did not is left out, not counted at its budget."
        )
    lines[-1] += (
        " An accuracy cell with (k/n) is over the k seeds that evaluated it (a run without evaluations is "
        "left out); a group of one seed shows its value without ±."
        + (
            " A MiB or wall s cell with (k/n) is over the k runs whose summary.json records it."
            if unrecorded
            else ""
        )
        + " Figures: the line is the mean over seeds, each seed linearly interpolated onto the x values any"
        " seed evaluated at where all of them have evaluations; the band spans the seeds' minimum to maximum."
        f" Each run's values at full precision: [{RUNS_FILE}]({RUNS_FILE})."
    )
    counts = [n for n in (len(r.curve("iteration", metric)[1]) for r in runs) if 0 < n < last]
    warnings: list[str] = []
    if counts:
        warnings.append(
            f"--last {last}: {len(counts)} run(s) have fewer evaluations (the fewest: {min(counts)}); "
            f"their last-{last} mean is over all their evaluations, the initial model's included"
        )
    diverged = [(r, at) for r in runs if (at := diverged_at(r)) is not None]
    if diverged:
        warnings.append(
            f"{len(diverged)} run(s) diverged, their test loss NaN or infinite from the iteration given on: "
            + ", ".join(f"{r.path.name} (seed {r.seed}, iteration {at})" for r, at in diverged)
            + "; their accuracies count in the tables as evaluated"
        )
    legend = label_legend(algorithms)
    if legend:
        lines += ["", legend]
    if warnings:  # the report states them, not only the terminal
        lines += ["", "Note: " + "; ".join(warnings) + "."]
    paired_somewhere: set[str] = set()
    for i, (setting_label, members) in enumerate(settings.items(), start=1):
        lines += ["", f"## {setting_label}", ""]
        names = [method_names[id(g)] for g in members]
        for pairing in pairings:
            others = set(names) - {pairing.baseline}
            if pairing.baseline in names and others & set(pairing.methods or others):
                paired_somewhere.add(pairing.baseline)
        lines += per_seed_table(members, names, target, x, last, metric) + [""]
        for pairing in pairings:
            lines += paired_table(members, names, pairing.baseline, last, metric, pairing.methods)
        for axis in axes:
            title = f"{setting_label}: {metric} vs {AXIS_TITLES[axis]}"
            fig = accuracy_figure(members, names, axis, title, metric)
            path = save(
                fig,
                out / f"{metric}_{axis}_{i}{'' if len(settings) == 1 else '_' + _slug(setting_label)}.png",
            )
            figures.append(path)
            lines.append(f"![{metric} against {AXIS_TITLES[axis]}]({path.name})")
    if skipped:
        lines += ["", "## Skipped", ""] + [f"- `{p}`: {reason}" for p, reason in skipped]
    _remove_stale_figures(out, figures)
    header, rows = run_table(settings, method_names, metric=metric, last=last, target=target, x=x)
    runs_csv = write_run_table(out / RUNS_FILE, header, rows)
    report = out / REPORT_FILE
    replace_text(report, "\n".join(lines) + "\n")
    warnings += [
        f"--paired {p.baseline!r}: no setting has it and a method to pair with it (the settings split "
        f"by {', '.join(setting_keys) or 'nothing'}); nothing was paired"
        for p in pairings
        if p.baseline not in paired_somewhere
    ]
    return Report(report, figures, groups, skipped, warnings, runs_csv)


def _with_metric(
    runs: list[Run], skipped: list[tuple[Path, str]], metric: str
) -> tuple[list[Run], list[tuple[Path, str]]]:
    """The runs that evaluated ``metric``, and the others added to ``skipped`` with the reason.

    Raises:
        ValueError: ``metric`` is not an accuracy column of any run (the message lists those there are).
    """
    if metric == "accuracy":
        return runs, skipped
    columns = accuracy_columns(runs)
    if metric not in columns:
        choices = ", ".join(repr(c) for c in columns) or "none"
        raise ValueError(
            f"--metric: {metric!r} is not an accuracy column of these runs; choose one of {choices}"
        )
    kept = [r for r in runs if r.final(metric) is not None]
    dropped = [(r.path, f"no {metric} in its evaluations") for r in runs if r.final(metric) is None]
    return kept, skipped + dropped


def split_varying_keys(groups: Sequence[Group], keys: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split the varying non-method ``keys`` into settings and keys bound to a method.

    A key is a *setting* (its values get a table section and a figure each) when some method variant was
    run with more than one of its values. A key whose value is fixed for every method variant but differs
    between them (a sweep's ``[link]`` axis giving each method its own budget, say) is part of the methods:
    all of them still meet in one figure, and the key is named in their labels.
    """
    if len({canonical(g.method) for g in groups}) < 2:
        return list(keys), []
    settings: list[str] = []
    bound: list[str] = []
    for key in keys:
        values: dict[str, set[str]] = {}
        for g in groups:
            values.setdefault(canonical(g.method), set()).add(label(g.setting, [key]))
        (settings if any(len(v) > 1 for v in values.values()) else bound).append(key)
    return settings, bound


def method_labels(groups: Sequence[Group], bound_keys: Sequence[str] = ()) -> dict[int, str]:
    """A line label per group: the method's name, plus what tells its variants apart.

    Parameters are compared only among groups of the same method (GAS with and without ``generate``
    becomes ``gas (generate=False)`` and ``gas (generate=True)``; FedAvg beside them stays ``fedavg``).
    ``bound_keys`` (see :func:`split_varying_keys`) are added to every label, e.g.
    ``fedasync (train.global_iterations=200)``. Runs of a sweep whose link axes give a ``label`` list are
    named by those labels instead (``fsl_mc`` rather than ``splitfed_v1 (model.aux=)``).
    """
    out: dict[int, str] = {}
    by_name: dict[str, list[Group]] = {}
    for g in groups:
        given = _sweep_labels(g)
        if given:  # the sweep's link labels name the method (e.g. ``fsl_mc`` for splitfed_v1)
            bound = label(g.setting, bound_keys)
            out[id(g)] = f"{given} ({bound})" if bound else given
        else:
            by_name.setdefault(str(g.method.get("name", "?")), []).append(g)
    for name, members in by_name.items():
        keys = differing_fields([{"params": m.method.get("params", {})} for m in members], ignore=())
        for g in members:
            params = label({"params": g.method.get("params", {})}, keys, "params.")
            parts = [params, label(g.setting, bound_keys)]
            detail = ", ".join(part for part in parts if part)
            out[id(g)] = f"{name} ({detail})" if detail else name
    return _told_apart(groups, out)


def _told_apart(groups: Sequence[Group], labels: dict[int, str]) -> dict[int, str]:
    """``labels`` with every label that names groups of different methods extended by what differs.

    A sweep's link label or a ``--label NAME=DIR`` can name runs of several method variants alike (a
    folder holding GAS with and without ``generate``, or a labelled axis beside an unlabelled one over
    ``algorithm.params``); a report keyed by label would show two rows of one name and pair only one of
    them. Such labels get the differing ``[algorithm]`` keys appended: ``X (generate=False)``. A label
    shared by one method's runs in different settings (a sweep's ``fedavg`` on two partitions) stays; one
    that clashes in any setting is extended in all of them, so a variant keeps one name throughout.
    """
    out = dict(labels)
    by_label: dict[str, list[Group]] = {}
    for g in groups:
        by_label.setdefault(labels[id(g)], []).append(g)
    for name, members in by_label.items():
        clash = any(
            canonical(a.method) != canonical(b.method) and not differing_fields([a.setting, b.setting])
            for i, a in enumerate(members)
            for b in members[i + 1 :]
        )
        if not clash:
            continue
        keys = differing_fields([g.method for g in members], ignore=())
        for g in members:
            detail = label(g.method, keys, "params.")
            out[id(g)] = f"{name[:-1]}, {detail})" if name.endswith(")") else f"{name} ({detail})"
    return out


def label_legend(algorithms: Mapping[str, str]) -> str:
    """A sentence naming the algorithm behind each method label that does not start with its name.

    A sweep's link labels name methods their own way, and runs gathered from several sweeps keep each
    sweep's labels: FedAvg may show as ``per_job``. ``algorithms`` maps each label of the report's method
    column to its ``algorithm.name``. A label that starts with the name as a whole word (``gas``,
    ``gas (generate=False)``, ``ca2fl_code_aliased`` for ca2fl) needs no legend. ``""`` when none does.

    Example:
        >>> label_legend({"gas": "gas", "per_job": "fedavg", "ca2fl_code": "ca2fl", "fsl_mc": "splitfed_v1"})
        'Method labels of the sweeps and the algorithm each runs: `per_job` fedavg, `fsl_mc` splitfed_v1.'
    """
    named = [
        f"`{lab}` {name}"
        for lab, name in algorithms.items()
        if name and not re.match(rf"{re.escape(name)}(?![A-Za-z0-9])", lab)
    ]
    return f"Method labels of the sweeps and the algorithm each runs: {', '.join(named)}." if named else ""


def _sweep_labels(group: Group) -> str:
    """The sweep's link labels shared by every run of ``group`` (``""`` when they have none or differ)."""
    found = {tuple(r.info.get("labels", {}).values()) for r in group.runs}
    return " / ".join(found.pop()) if len(found) == 1 else ""


FIGURE_NAME = re.compile(rf"\w*accuracy_({'|'.join(UNITS)})_\d+(_[\w.-]*)?\.png")
"""The names of the figures a report writes (``<metric>_<x>_<n>[_<setting>].png``)."""


def _remove_stale_figures(out: Path, written: Sequence[Path]) -> None:
    """Remove figures an earlier report wrote to ``out`` that this one did not (another --x or settings)."""
    keep = {p.name for p in written}
    for path in out.glob("*.png"):
        if path.name not in keep and FIGURE_NAME.fullmatch(path.name):
            path.unlink()


def _datasets(runs: Sequence) -> list[str]:
    """Which datasets the runs trained on; generated data are named as such, never as a real-data result."""
    names = sorted({str(r.scenario.get("data", {}).get("dataset", "?")) for r in runs})
    synthetic = any("synthetic" in n for n in names) or any(r.summary.get("synthetic_data") for r in runs)
    note = " (synthetic data test the machinery; they are no result on any real dataset)"
    return [f"Data: {', '.join(names)}{note if synthetic else ''}.", ""]


def _provenance(runs: Sequence) -> list[str]:
    """Which raysfl version (and commit, when recorded) made the runs, on which processors and torch.

    Processors can differ in a result's last bits, which a training run can grow into points of accuracy.
    """
    made = sorted(
        {
            f"raysfl {r.info.get('raysfl_version') or '?'}"
            + (f" at commit {r.info['commit']}" if r.info.get("commit") else "")
            for r in runs
        }
    )
    lines = [f"Runs made with {', '.join(made)}.", ""] if made else []
    where = sorted(
        {
            f"{r.info['driver_processor']}"
            + (f", torch {r.info['torch_version']}" if r.info.get("torch_version") else "")
            for r in runs
            if r.info.get("driver_processor")
        }
    )
    if where:
        lines[-1:-1] = [f"Driver processor: {'; '.join(where)}."]
    return lines
