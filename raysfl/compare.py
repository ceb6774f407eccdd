"""Side-by-side comparison of finished runs: accuracy, emulated time to a target, bytes, paper numbers.

A run directory holds ``summary.json``, ``metrics.parquet`` and ``config.toml`` (see
:mod:`raysfl.engine.runner`). A scenario may declare the paper's numbers in a ``[reference]`` table, e.g.
``reference = { accuracy = 90.66, std = 0.20, source = "GAS Table 1, FMNIST s=2" }`` (accuracy in %);
they are printed next to the measured values.

With a target accuracy the table also gives the FedASMU paper's relative gains of the *first* run ("ours")
over every other run (fedasmu spec §4.6, formulas that reproduce the paper's stated numbers):

    accuracy gain = Acc_ours / Acc_base − 1          ("X % higher accuracy")
    speed gain    = 1 − Time_ours / Time_base       ("Y % faster", time to the target accuracy)

where Acc is the convergence accuracy, the mean of the last 5 evaluations (spec A19 [A]), and a gain is
"-" when either run never reaches the target.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raysfl.report.runs import target_text
from raysfl.run_files import METRIC_COLUMNS, RunDirError, read_config, read_metrics, read_summary

__all__ = ["RunDirError", "RunRecord", "compare_table", "load_run"]


@dataclass(frozen=True)
class RunRecord:
    """What :func:`compare_table` needs of one run."""

    path: Path
    scenario: str
    algorithm: str
    dataset: str
    final_accuracy: float | None
    best_accuracy: float | None
    emulated_s: float
    bytes_up: int
    bytes_down: int
    curve: list[tuple[float, float]]  # (emulated s, accuracy) per evaluation
    reference: dict[str, Any]
    interrupted: bool = False  # stopped before its budget (Ctrl-C); its numbers are not the run's end


SUMMARY_KEYS = (  # what a comparison row reads from summary.json
    "scenario",
    "algorithm",
    "dataset",
    "final_accuracy",
    "best_accuracy",
    "emulated_s",
    "bytes_up",
    "bytes_down",
)


def load_run(path: str | Path) -> RunRecord:
    """Read a run directory; raises :class:`RunDirError` naming the missing or damaged file."""
    p = Path(path)
    for name in ("summary.json", "metrics.parquet", "config.toml"):
        if not (p / name).is_file():
            raise RunDirError(f"{p}: not a finished run directory ({name} is missing)")
    summary, config = read_summary(p, SUMMARY_KEYS), read_config(p)
    rows = read_metrics(p, (*METRIC_COLUMNS, "accuracy"))
    curve = [(float(r["t"]), float(r["accuracy"])) for r in rows if r.get("accuracy") is not None]
    reference = config.get("reference", {})
    if not isinstance(reference, dict):
        raise RunDirError(f"{p / 'config.toml'}: damaged or not raysfl's ([reference] is not a table)")
    return RunRecord(
        path=p,
        scenario=str(summary["scenario"]),
        algorithm=str(summary["algorithm"]),
        dataset=str(summary["dataset"]),
        final_accuracy=_maybe_number(summary, "final_accuracy", p),
        best_accuracy=_maybe_number(summary, "best_accuracy", p),
        emulated_s=_number(summary, "emulated_s", p),
        bytes_up=int(_number(summary, "bytes_up", p)),
        bytes_down=int(_number(summary, "bytes_down", p)),
        curve=curve,
        reference=dict(reference),
        interrupted=bool(summary.get("interrupted", False)),
    )


def _number(summary: dict[str, Any], key: str, run_dir: Path) -> float:
    """``summary[key]`` as a float; a value of another type names the damaged file."""
    value = summary[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RunDirError(
            f"{run_dir / 'summary.json'}: damaged or not raysfl's ({key} is {value!r}, not a number)"
        )
    return float(value)


def _maybe_number(summary: dict[str, Any], key: str, run_dir: Path) -> float | None:
    """``summary[key]`` as a float, or ``None`` where the run has none (no evaluation finished)."""
    return None if summary[key] is None else _number(summary, key, run_dir)


def time_to_accuracy(curve: list[tuple[float, float]], target: float) -> float | None:
    """Emulated seconds of the first evaluation with accuracy ≥ ``target`` (``None`` if never reached).

    Example:
        >>> time_to_accuracy([(0.0, 0.1), (30.0, 0.55), (60.0, 0.71)], 0.6)
        60.0
    """
    for t, acc in curve:
        if acc >= target:
            return t
    return None


def convergence_accuracy(curve: list[tuple[float, float]], last: int = 5) -> float | None:
    """Mean accuracy of the last ``last`` evaluations (the paper's undefined "convergence accuracy", A19).

    Example:
        >>> convergence_accuracy([(0.0, 0.1), (1.0, 0.4), (2.0, 0.5), (3.0, 0.6)], last=2)
        0.55
    """
    tail = [acc for _, acc in curve[-last:]]
    return sum(tail) / len(tail) if tail else None


def accuracy_gain(ours: float | None, base: float | None) -> float | None:
    """Acc_ours / Acc_base − 1, FedASMU paper §6 (spec §4.6); e.g. 0.267 vs 0.168 → +58.93 %.

    Example:
        >>> round(100 * accuracy_gain(0.267, 0.168), 2)
        58.93
    """
    if ours is None or base is None or base <= 0:
        return None
    return ours / base - 1.0


def speed_gain(t_ours: float | None, t_base: float | None) -> float | None:
    """1 − Time_ours / Time_base, FedASMU paper §6 (spec §4.6); e.g. 12591 vs 83693 → 84.96 % faster.

    Example:
        >>> round(100 * speed_gain(12591, 83693), 2)
        84.96
    """
    if t_ours is None or t_base is None or t_base <= 0:
        return None
    return 1.0 - t_ours / t_base


def _signed_pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.2f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f}"


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f}"


def distinct_names(paths: list[Path]) -> list[str]:
    """Each path's last parts, as few as tell it from every other path.

    ``seed1_gas`` alone, but ``s2/seed1_gas`` beside ``alpha01/seed1_gas`` (one trial of two sweeps).
    """

    def tail(path: Path, depth: int) -> tuple[str, ...]:
        return path.parts[-depth:]

    names = []
    for i, path in enumerate(paths):
        others = [q for j, q in enumerate(paths) if j != i]
        depth = 1
        while depth < len(path.parts) and any(tail(q, depth) == tail(path, depth) for q in others):
            depth += 1
        names.append("/".join(tail(path, depth)))
    return names


def compare_table(runs: list[RunRecord], target: float | None = None) -> str:
    """A markdown table of the runs.

    ``target`` (fraction, e.g. 0.6) adds the emulated time to that accuracy, the convergence accuracy and
    the first run's accuracy and speed gains over each run (module docstring).
    """
    head = ["run", "algorithm", "dataset", "final acc %", "best acc %", "paper acc %", "emulated s"]
    if target is not None:
        head += [f"s to {target_text(target)}", "conv acc %", "acc gain of 1st %", "speed gain of 1st %"]
    head += ["MiB up", "MiB down"]
    ours = runs[0] if runs else None
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r, name in zip(runs, distinct_names([r.path for r in runs]), strict=True):
        ref = r.reference.get("accuracy")
        paper = (
            "-"
            if ref is None
            else f"{ref:.2f}" + (f" ± {r.reference['std']:.2f}" if "std" in r.reference else "")
        )
        row = [
            name + (" (interrupted)" if r.interrupted else ""),
            r.algorithm,
            r.dataset,
            _pct(r.final_accuracy),
            _pct(r.best_accuracy),
            paper,
            f"{r.emulated_s:.1f}",
        ]
        if target is not None and ours is not None:
            reached = time_to_accuracy(r.curve, target)
            row.append("not reached" if reached is None else f"{reached:.1f}")
            conv = convergence_accuracy(r.curve)
            row.append(_pct(conv))
            if r is ours:
                row += ["-", "-"]
            else:
                acc = accuracy_gain(convergence_accuracy(ours.curve), conv)
                speed = speed_gain(time_to_accuracy(ours.curve, target), reached)
                row += [_signed_pct(acc), _signed_pct(speed)]
        row += [_mb(r.bytes_up), _mb(r.bytes_down)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
