"""Paired differences to a baseline method, seed by seed: the view a claim "X lowers accuracy" is judged by.

Runs of one setting that share a seed share its data partition, devices and initial model, so the
difference of two methods *within* a seed is free of the seed-to-seed spread that the mean ± std columns
carry. For each method of a setting and the ``--paired`` baseline of that setting, on the seeds both ran:

    per seed          (method − baseline) × 100, in accuracy points: final evaluation, and with
                      ``--last K`` the mean over each run's last K evaluations (``Run.end``)
    mean ± std (SE)   over those seeds; SE = std / √n, the standard error of the mean difference
    95 % interval     mean ± t(0.975, n − 1) · SE, Student's t with n − 1 degrees of freedom: with the few
                      seeds a reproduction affords it is much wider than ± 2 · SE (t = 3.18 for n = 4)
    ahead / behind    how many seeds have the method above / below the baseline (ties count in neither)
    processors        a note names the seeds whose two runs were computed on different processors

``--paired BASELINE`` pairs every other method of a setting with BASELINE; ``--paired "METHOD vs BASELINE"``
pairs only METHOD, so a report over many variants lists the comparisons a claim makes and no others
(:func:`parse_pairings`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from raysfl.engine.provenance import computing_processors
from raysfl.report.runs import Group, Run, is_finite, mean_std
from raysfl.report.student_t import mean_interval

CONFIDENCE = 0.95  # the level of the paired tables' interval column


@dataclass(frozen=True)
class PairedDifference:
    """One method against the baseline on their common seeds; differences in points (a time: its unit)."""

    seeds: tuple[int, ...]
    differences: tuple[float, ...]  # per seed, in the order of ``seeds``
    mean: float | None
    std: float | None

    @property
    def standard_error(self) -> float | None:
        """The standard error of the mean difference, std / √n (``None`` with fewer than two seeds)."""
        return None if self.std is None else self.std / math.sqrt(len(self.differences))

    def interval(self, level: float = CONFIDENCE) -> tuple[float, float] | None:
        """The two-sided ``level`` confidence interval of the mean difference; ``None`` below two seeds.

        mean ± t · SE with n − 1 degrees of freedom (:func:`raysfl.report.student_t.mean_interval`).
        """
        if self.mean is None or self.standard_error is None:
            return None
        return mean_interval(self.mean, self.standard_error, len(self.differences), level)

    @property
    def ahead(self) -> int:
        """Seeds where the method is above the baseline."""
        return sum(d > 0 for d in self.differences)

    @property
    def behind(self) -> int:
        """Seeds where the method is below the baseline."""
        return sum(d < 0 for d in self.differences)


def paired_difference(
    method: Group, baseline: Group, last: int = 0, metric: str = "accuracy"
) -> PairedDifference:
    """``method`` − ``baseline`` in accuracy points, seed by seed, on the seeds both groups ran.

    Example: seeds 1, 2 with finals 0.62 / 0.50 against 0.60 / 0.55 give differences +2.0 and −5.0
    points, mean −1.5, one seed ahead and one behind; std 4.95, standard error 3.5, and a 95 % interval of
    −1.5 ± 12.706 · 3.5 (one degree of freedom).
    """
    mine = {r.seed: r.end(metric, last) for r in method.runs}
    return seed_differences(mine, {r.seed: r.end(metric, last) for r in baseline.runs})


def seed_differences(
    method: Mapping[int, float | None], baseline: Mapping[int, float | None], scale: float = 100.0
) -> PairedDifference:
    """(``method`` − ``baseline``) × ``scale`` seed by seed, from two maps of seed → value.

    The default scale turns accuracies (fractions) into points; 1 keeps seconds as seconds. A seed either
    map lacks, or holds no finite value for, is left out of n.

    Example:
        >>> diff = seed_differences({1: 0.62, 2: 0.50, 3: 0.7}, {1: 0.60, 2: 0.55})
        >>> diff.seeds, [round(d, 9) for d in diff.differences]
        ((1, 2), [2.0, -5.0])
    """
    pairs = []
    for seed in sorted(method):
        mine, theirs = method[seed], baseline.get(seed)
        if is_finite(mine) and is_finite(theirs):
            pairs.append((seed, scale * (mine - theirs)))
    mean, std = mean_std([d for _, d in pairs])
    return PairedDifference(
        seeds=tuple(s for s, _ in pairs), differences=tuple(d for _, d in pairs), mean=mean, std=std
    )


def computed_on(run: Run) -> frozenset[str]:
    """The processor models that computed ``run``; empty for a run that records none.

    Its server's and its pools', from ``summary.json``'s placement: a server on a CPU by that CPU's model, a
    server on a GPU by the GPU's (``device_name``, e.g. ``"GPU NVIDIA H100 80GB HBM3"``); else
    ``config.toml``'s ``[run] driver_processor`` (runs made before the actors' processors were recorded).
    """
    placement = run.summary.get("placement") or {}
    server, pools = computing_processors(placement)
    if placement.get("device", "cpu") != "cpu" and placement.get("device_name"):
        server = f"GPU {placement['device_name']}"  # a GPU server's arithmetic is the GPU's, not its host's
    actors = frozenset(p for p in [server, *pools] if p)
    if actors:
        return actors
    driver = run.info.get("driver_processor")
    return frozenset([driver]) if driver else frozenset()


def cross_processor_seeds(method: Group, baseline: Group) -> tuple[int, ...]:
    """The seeds whose ``method`` and ``baseline`` runs were computed on different processors, in order.

    A processor can change a result's last bits, which training grows into points of accuracy (two
    processors moved one method's runs by 0.5 to 1.8 points, benchmarks/REPRODUCTION.md), so such a seed's
    difference holds the machines' part as well as the methods'. Compares :func:`computed_on`; a run that
    records no processor counts as no difference.
    """
    return mixed_processor_seeds(
        {r.seed: computed_on(r) for r in method.runs}, {r.seed: computed_on(r) for r in baseline.runs}
    )


def mixed_processor_seeds(
    method: Mapping[int, frozenset[str]], baseline: Mapping[int, frozenset[str]]
) -> tuple[int, ...]:
    """The seeds both maps hold with different, non-empty processor sets, in order.

    Example:
        >>> mixed_processor_seeds({1: frozenset({"A"}), 2: frozenset({"A"}), 3: frozenset()},
        ...                       {1: frozenset({"A"}), 2: frozenset({"B"}), 3: frozenset({"B"})})
        (2,)
    """
    return tuple(
        seed
        for seed in sorted(method)
        if method[seed] and baseline.get(seed) and method[seed] != baseline.get(seed)
    )


def resolve_method(name: str, labels: Sequence[str], algorithms: Mapping[str, str] | None = None) -> str:
    """The method label ``name`` stands for: itself, the one label ``name (...)``, or algorithm ``name``'s.

    A report labels variants by what tells them apart (``fsl_mc (model.aux=)``); the bare name is enough
    when it picks one label. A sweep's link labels name methods their own way (``ca2fl_code_aliased``);
    ``algorithms`` maps each label to its runs' ``algorithm.name``, so ``ca2fl`` picks it when no other
    label's runs are CA2FL.

    Example:
        >>> resolve_method("fsl_mc", ["cse_fsl_h5 (model.aux=mlp)", "fsl_mc (model.aux=)"])
        'fsl_mc (model.aux=)'
        >>> resolve_method("ca2fl", ["ca2fl_code_aliased", "fedavg"], {"ca2fl_code_aliased": "ca2fl"})
        'ca2fl_code_aliased'

    Raises:
        ValueError: naming ``--paired`` and listing the labels, when ``name`` picks none or several.
    """
    if name in labels:
        return name
    matches = [lab for lab in dict.fromkeys(labels) if lab.split(" (", 1)[0] == name]
    if not matches:
        matches = [lab for lab in dict.fromkeys(labels) if (algorithms or {}).get(lab) == name]
    if len(matches) == 1:
        return matches[0]
    choices = ", ".join(repr(lab) for lab in (matches or dict.fromkeys(labels)))
    why = "names several methods" if matches else "is not a method of these runs"
    raise ValueError(f"--paired: {name!r} {why}; choose one of {choices}")


PAIR_SEPARATOR = " vs "


@dataclass(frozen=True)
class Pairing:
    """One baseline's paired table: against ``methods`` in that order, or every other method when ``None``."""

    baseline: str
    methods: tuple[str, ...] | None = None


def parse_pairings(
    specs: Sequence[str], labels: Sequence[str], algorithms: Mapping[str, str] | None = None
) -> list[Pairing]:
    """The ``--paired`` values as one :class:`Pairing` per baseline, in the order baselines first appear.

    A value is a method label (or a bare name or an algorithm's name, :func:`resolve_method` with
    ``algorithms``): every other method is paired with it. ``"METHOD vs BASELINE"`` adds METHOD to
    BASELINE's table; a baseline also given alone keeps all.

    Example:
        >>> labels = ["fedasmu", "fedasmu_da", "fedasmu_fa", "fedasmu_0"]
        >>> specs = ["fedasmu vs fedasmu_da", "fedasmu_fa vs fedasmu_0", "fedasmu_da vs fedasmu_0"]
        >>> for pairing in parse_pairings(specs, labels):
        ...     print(pairing.baseline, pairing.methods)
        fedasmu_da ('fedasmu',)
        fedasmu_0 ('fedasmu_fa', 'fedasmu_da')

    Raises:
        ValueError: naming ``--paired``, for a name that picks no label or several, or a method paired
            with itself.
    """
    chosen: dict[str, list[str] | None] = {}
    for spec in specs:
        if spec in labels or PAIR_SEPARATOR not in spec:
            chosen[resolve_method(spec, labels, algorithms)] = None
            continue
        method_name, _, baseline_name = spec.rpartition(PAIR_SEPARATOR)
        method = resolve_method(method_name, labels, algorithms)
        baseline = resolve_method(baseline_name, labels, algorithms)
        if method == baseline:
            raise ValueError(f"--paired: {spec!r} pairs {method!r} with itself")
        methods = chosen.setdefault(baseline, [])
        if methods is not None and method not in methods:
            methods.append(method)
    return [Pairing(b, None if m is None else tuple(m)) for b, m in chosen.items()]


def _signed(value: float) -> str:
    """A signed difference to 0.01 points; "0.00" only for an exact tie.

    A difference below 0.005 prints "+0.00" or "-0.00", so each cell shows the side of the ahead / behind
    count it falls on.
    """
    return "0.00" if value == 0 else f"{value:+.2f}"


def _summary(diff: PairedDifference) -> str:
    if diff.mean is None:
        return "-"
    text = _signed(diff.mean)
    if diff.std is not None:
        text += f" ± {diff.std:.2f} ({diff.standard_error:.2f})"
    return text


def _interval(diff: PairedDifference) -> str:
    bounds = diff.interval()
    return "-" if bounds is None else f"[{_signed(bounds[0])}, {_signed(bounds[1])}]"


def paired_table(
    members: Sequence[Group],
    names: Sequence[str],
    baseline: str,
    last: int = 0,
    metric: str = "accuracy",
    methods: Sequence[str] | None = None,
) -> list[str]:
    """Markdown lines of one setting's paired tables of ``metric`` against the method labelled ``baseline``.

    One table for the final evaluation and, with ``last`` > 0, one for the last-``last`` mean; a row per
    method of ``methods`` that ran in this setting (every other method when ``None``). A setting without
    the baseline, or without any of ``methods``, gets one line saying so.
    """
    by_name = dict(zip(names, members, strict=True))
    if baseline not in by_name:
        return [f"No `{baseline}` runs in this setting: nothing to pair with."]
    base = by_name[baseline]
    wanted = [n for n in names if n != baseline] if methods is None else [n for n in methods if n in by_name]
    if not wanted:
        listed = ", ".join(f"`{n}`" for n in methods or ())
        return [f"No {listed} runs in this setting to pair with `{baseline}`."]
    others = [(n, by_name[n]) for n in wanted]
    seeds = sorted({r.seed for r in base.runs})
    lines: list[str] = []
    views = [(0, f"final {metric}")] + ([(last, f"last-{last} mean {metric}")] if last > 0 else [])
    for k, what in views:
        rows = [(name, paired_difference(group, base, k, metric)) for name, group in others]
        lines += paired_rows(baseline, what, seeds, rows)
    for name, group in others:
        lines += mixed_processor_note(name, baseline, cross_processor_seeds(group, base))
    return lines


def paired_rows(
    baseline: str,
    what: str,
    seeds: Sequence[int],
    rows: Sequence[tuple[str, PairedDifference]],
    unit: str = "points",
    signs: tuple[str, str] = ("ahead", "behind"),
) -> list[str]:
    """One paired table: a column per seed of ``seeds``, then mean ± std (SE), interval, ahead / behind.

    ``what`` names the compared value ("final accuracy") and ``unit`` its differences' unit; ``signs``
    name the counts of positive and negative differences (("later", "sooner") for a time). A row's seed
    cell is empty where that method has no difference (a seed it did not run).
    """
    lines = [
        f"Paired with `{baseline}`, {what} ({unit}, method − {baseline}, on the seeds both ran):",
        "",
        "| method | "
        + " | ".join(f"seed {s}" for s in seeds)
        + f" | mean ± std (SE) | {CONFIDENCE * 100:.0f} % interval (t) | {signs[0]} / {signs[1]} |",
        "|---|" + "---|" * (len(seeds) + 3),
    ]
    for name, diff in rows:
        cells = dict(zip(diff.seeds, diff.differences, strict=True))
        row = [name] + [_signed(cells[s]) if s in cells else "" for s in seeds]
        row += [_summary(diff), _interval(diff), f"{diff.ahead} / {diff.behind}"]
        lines.append("| " + " | ".join(row) + " |")
    return lines + [""]


def mixed_processor_note(method: str, baseline: str, mixed: Sequence[int]) -> list[str]:
    """The paragraph naming the seeds whose ``method`` − ``baseline`` pair crossed processors (none: [])."""
    if not mixed:
        return []
    which = ", ".join(str(s) for s in mixed)
    return [
        f"Seed{'s' if len(mixed) > 1 else ''} {which} of `{method}` − `{baseline}` pair runs computed "
        "on different processors (summary.json's `placement`, else config.toml's "
        "`driver_processor`): a processor can change a result's last bits, which training grows "
        "into points, so those differences are the machines' as well as the methods'.",
        "",
    ]
