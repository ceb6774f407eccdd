"""GAS Fig. 2(a) from finished runs: the server update's gradient dissimilarity with and without generation.

Reads runs made with ``algorithm.params.dissimilarity_every`` set (a sweep's output, such as
``scenarios/repro/gas/fmnist_s2_fig2.sweep.toml``'s) and writes, into ``--out``:

- ``dissimilarity.md``: per evaluation, mean ± std over seeds of ‖∇F_s − ∇F‖² for every method's update batch,
  for runs that generate for the same steps' real activations alone, and for the control batch (as many iid
  test rows as the update's batch: its sampling noise without bias); per seed the geometric mean over
  the run's evaluations of each, absolute and relative to ‖∇F‖²; within each generating run log10(real /
  A_concat) (Lemma 1 at equal w_s), and across runs log10 of a run without generation's relative
  dissimilarity over a generating run's, paired by seed, each with its 95 % Student-t interval;
- ``dissimilarity.png``: the curves against the global iteration on a log scale, absolute and relative (mean
  over seeds, min–max band).

Usage:
    python benchmarks/gas_dissimilarity.py runs/repro/gas/fmnist_s2_fig2 \
        --out benchmarks/reproduction/gas/fmnist_s2_fig2
Methods are named by the sweep's labels (or ``--label NAME=DIR``, as in ``raysfl report``).
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from raysfl.report.runs import Run, find_runs, mean_curve, mean_std
from raysfl.report.student_t import mean_interval
from raysfl.safe_write import replace_file, replace_text

BATCH, REAL, CONTROL, SCALE = (
    "grad_dissimilarity",
    "grad_dissimilarity_real",
    "grad_dissimilarity_iid",
    "grad_reference_norm2",
)
SUFFIX = {
    BATCH: " (update batch)",
    REAL: " (real activations only)",
    CONTROL: " (control: iid rows, same size)",
}


def method_of(run: Run) -> str:
    """The run's method label (a sweep's or ``--label``'s), else its algorithm's name."""
    return run.info.get("labels", {}).get("method") or run.scenario.get("algorithm", {}).get("name", "?")


def generates(run: Run) -> bool:
    """Whether the run generated activations (its real-only curve then differs from its batch curve)."""
    return bool(run.scenario.get("algorithm", {}).get("params", {}).get("generate", True))


def series(runs: Sequence[Run]) -> dict[str, dict[int, Run]]:
    """Curve name → seed → run: each method's update batch, its real activations alone where it generates,
    and its control batch where the runs measured one (:data:`SUFFIX`)."""
    out: dict[str, dict[int, Run]] = defaultdict(dict)
    for run in runs:
        if not len(run.curve("iteration", BATCH)[1]):
            continue  # not measured
        name = method_of(run)
        for metric in (BATCH, REAL, CONTROL):
            if metric == REAL and not generates(run):
                continue
            if len(run.curve("iteration", metric)[1]):
                out[name + SUFFIX[metric]][run.seed] = run
    return dict(out)


def column(name: str) -> str:
    """The metrics column a curve name reads."""
    return next(metric for metric, suffix in SUFFIX.items() if name.endswith(suffix))


def _pm(values: Sequence[float]) -> str:
    if not values:
        return "-"
    std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    return f"{np.mean(values):.4g} ± {std:.2g}"


def per_evaluation_table(curves: dict[str, dict[int, Run]]) -> list[str]:
    """Rows: evaluation iterations; columns: each curve's mean ± std over seeds, then each method's ‖∇F‖²."""
    names = list(curves)
    scales = [n for n in names if column(n) == BATCH]  # one per method
    runs = [r for by_seed in curves.values() for r in by_seed.values()]
    iterations = sorted({int(i) for r in runs for i in r.curve("iteration", BATCH)[0]})
    head = " | ".join([*names, *(f"‖∇F‖², {n.removesuffix(SUFFIX[BATCH])}" for n in scales)])
    lines = [f"| iteration | {head} |", "|" + "---|" * (len(names) + len(scales) + 1)]
    for it in iterations:
        cells = [_pm(values_at(curves[n], column(n), it)) for n in names]
        cells += [_pm(values_at(curves[n], SCALE, it)) for n in scales]
        lines.append(f"| {it} | " + " | ".join(cells) + " |")
    return lines


def values_at(runs: dict[int, Run], metric: str, iteration: int) -> list[float]:
    """Every seed's ``metric`` at the evaluation of ``iteration`` (seeds without one are left out)."""
    out = []
    for run in runs.values():
        xs, ys = run.curve("iteration", metric)
        out += [float(y) for x, y in zip(xs, ys, strict=True) if int(x) == iteration]
    return out


def geometric_mean(run: Run, metric: str, relative: bool = False) -> float:
    """The geometric mean over a run's evaluations of ``metric`` (divided by ‖∇F‖² when ``relative``).

    The dissimilarity grows by orders of magnitude as training leaves the plateau; a geometric mean weighs
    every evaluation alike where an arithmetic one would be the last few.
    """
    values = run.curve("iteration", metric)[1]
    if relative:
        values = values / run.curve("iteration", SCALE)[1]
    return float(np.exp(np.mean(np.log(values))))


def interval(values: Sequence[float]) -> str:
    """mean ± std and the 95 % Student-t interval of the mean (n − 1 degrees of freedom)."""
    mean, std = mean_std(values)
    if std is None:
        return f"{mean:+.3f} (one seed)"
    low, high = mean_interval(mean, std / math.sqrt(len(values)), len(values))
    return f"{mean:+.3f} ± {std:.3f}, 95 % t interval [{low:+.3f}, {high:+.3f}] (n = {len(values)})"


def per_seed_table(curves: dict[str, dict[int, Run]], relative: bool) -> list[str]:
    """Per seed and curve: the geometric mean over evaluations (divided by ‖∇F‖² when ``relative``)."""
    names = list(curves)
    seeds = sorted({s for runs in curves.values() for s in runs})
    lines = [f"| seed | {' | '.join(names)} |", "|" + "---|" * (len(names) + 1)]
    for seed in seeds:
        cells = []
        for n in names:
            run = curves[n].get(seed)
            cells.append("-" if run is None else f"{geometric_mean(run, column(n), relative):.4g}")
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    return lines


def lemma1_lines(runs: Sequence[Run]) -> list[str]:
    """Within each generating run: log10(real / A_concat) per evaluation, per seed, and over seeds."""
    lines = []
    by_method: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        if generates(run) and len(run.curve("iteration", BATCH)[1]):
            by_method[method_of(run)].append(run)
    for name, group in by_method.items():
        per_seed = []
        lower = total = 0
        for run in sorted(group, key=lambda r: r.seed):
            batch, real = run.curve("iteration", BATCH)[1], run.curve("iteration", REAL)[1]
            lower += int(np.sum(batch < real))
            total += len(batch)
            per_seed.append(float(np.mean(np.log10(real / batch))))
        lines.append(
            f"- {name}: the update batch's dissimilarity is below its real activations' in {lower} of "
            f"{total} evaluations; mean log10(real / batch) per seed "
            f"{', '.join(f'{v:+.3f}' for v in per_seed)}; over seeds {interval(per_seed)}."
        )
    return lines


def noise_floor_lines(runs: Sequence[Run]) -> list[str]:
    """Per method: log10(update batch / control) per seed and over seeds: the bias above sampling noise.

    0 means the update's batch is as close to ∇F as iid rows of its size; each unit above is a factor 10.
    """
    by_method: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        if len(run.curve("iteration", CONTROL)[1]):
            by_method[method_of(run)].append(run)
    lines = []
    for name, group in by_method.items():
        per_seed = []
        for run in sorted(group, key=lambda r: r.seed):
            (bx, by), (cx, cy) = run.curve("iteration", BATCH), run.curve("iteration", CONTROL)
            at = dict(zip(cx.tolist(), cy.tolist(), strict=True))
            pairs = [(b, at[x]) for x, b in zip(bx.tolist(), by.tolist(), strict=True) if x in at]
            per_seed.append(float(np.mean([math.log10(b / c) for b, c in pairs])))
        lines.append(
            f"- {name}: mean log10(update batch / control) per seed "
            f"{', '.join(f'{v:+.3f}' for v in per_seed)}; over seeds {interval(per_seed)}."
        )
    return lines or ["- (no run measured a control batch: the test set had no rows outside the reference)"]


def across_runs_lines(curves: dict[str, dict[int, Run]]) -> list[str]:
    """Each generating method's update batch against each other method's, relative to ‖∇F‖², paired by seed.

    log10 of (the other's geometric-mean relative dissimilarity / the generating method's): positive when
    generation leaves the updates less biased along the whole run (Fig. 2(a)'s two curves).
    """
    batch = {n: runs for n, runs in curves.items() if column(n) == BATCH}
    lines = []
    for gen_name, gen_runs in batch.items():
        if not any(generates(r) for r in gen_runs.values()):
            continue
        for other, other_runs in batch.items():
            if other == gen_name or any(generates(r) for r in other_runs.values()):
                continue
            seeds = sorted(set(gen_runs) & set(other_runs))
            diffs = [
                math.log10(
                    geometric_mean(other_runs[s], BATCH, True) / geometric_mean(gen_runs[s], BATCH, True)
                )
                for s in seeds
            ]
            lines.append(
                f"- log10({other} / {gen_name}), relative to each run's ‖∇F‖²: per seed "
                f"{', '.join(f'{v:+.3f}' for v in diffs)}; over seeds {interval(diffs)}."
            )
    return lines or ["- (no run without generation to compare with)"]


def figure(curves: dict[str, dict[int, Run]], path: Path) -> None:
    """Absolute and relative (÷ ‖∇F‖²) curves against the global iteration, log y: seed mean, min–max band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.5), dpi=100)
    for ax, relative in zip(axes, (False, True), strict=True):
        for name, runs in curves.items():
            pts = []
            for run in runs.values():
                xs, ys = run.curve("iteration", column(name))
                pts.append((xs, ys / run.curve("iteration", SCALE)[1] if relative else ys))
            x, mean, lo, hi = mean_curve(pts)
            style = ":" if column(name) == CONTROL else "-"
            (line,) = ax.plot(x, mean, style, label=f"{name}, {len(pts)} seeds")
            ax.fill_between(x, lo, hi, alpha=0.2, color=line.get_color())
        ax.set_yscale("log")
        ax.set_xlabel("global iteration")
        ax.set_ylabel("‖∇F_s − ∇F‖² / ‖∇F‖²" if relative else "‖∇F_s − ∇F‖²")
    axes[0].set_title("gradient dissimilarity of the server update", fontsize=10)
    axes[1].set_title("relative to the reference gradient's ‖∇F‖²", fontsize=10)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    replace_file(path, lambda tmp: fig.savefig(tmp, format="png"))
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """Write dissimilarity.md and dissimilarity.png for the runs under the DIRs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="run directories or sweep outputs")
    parser.add_argument("--out", required=True, help="folder for dissimilarity.md and dissimilarity.png")
    parser.add_argument("--label", action="append", default=[], metavar="NAME=DIR", help="as raysfl report's")
    args = parser.parse_args(argv)
    runs, skipped = find_runs(args.dirs, args.label)
    curves = series(runs)
    if not curves:
        parser.error(
            "no finished run under the DIRs measured the dissimilarity (algorithm.params.dissimilarity_every)"
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    commits = sorted({str(r.info.get("commit", "?")) for r in runs})
    text = [
        "# GAS gradient dissimilarity (Fig. 2(a))",
        "",
        f"Made by `python benchmarks/gas_dissimilarity.py {' '.join(args.dirs)} --out {args.out}`"
        + "".join(f" --label {x}" for x in args.label)
        + f" from {len(runs)} finished runs (commits {', '.join(commits)}); {len(skipped)} skipped.",
        "",
        "‖∇F_s − ∇F‖² at the server model each measured update starts from: ∇F_s on the update's batch",
        "(A_concat, or the real activations alone), ∇F on the fixed test sample through the current client",
        "model. Each value is the mean over the measurements since the previous evaluation.",
        "",
        "## Per evaluation (mean ± std over seeds)",
        "",
        *per_evaluation_table(curves),
        "",
        "## Per seed (geometric mean over the run's evaluations)",
        "",
        *per_seed_table(curves, relative=False),
        "",
        "Relative to each evaluation's ‖∇F‖² (its mean dissimilarity over its mean ‖∇F‖²):",
        "",
        *per_seed_table(curves, relative=True),
        "",
        "## Lemma 1 within each run (the same server model, with and without the generated rows)",
        "",
        *lemma1_lines(runs),
        "",
        "## Above the sampling noise (each update batch against its control batch of iid test rows)",
        "",
        *noise_floor_lines(runs),
        "",
        "## Across runs (each run's own trajectory, as Fig. 2(a) compares them)",
        "",
        *across_runs_lines(curves),
        "",
        "![gradient dissimilarity against global iteration](dissimilarity.png)",
        "",
    ]
    figure(curves, out / "dissimilarity.png")
    replace_text(out / "dissimilarity.md", "\n".join(text))
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
