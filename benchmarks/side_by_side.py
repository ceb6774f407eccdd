"""The same scenarios run by two raysfl checkouts one after the other: how much faster is this one (issue 17).

Each scenario runs as ``raysfl run SCENARIO key=value ... --out DIR`` in a fresh process, first with the
*baseline* (another checkout of raysfl with its own virtualenv, e.g. a ``git worktree`` of an older
commit) and then with this checkout, ``--repeats`` times in alternation (baseline, current, baseline,
current, ...), so both see the machine in the same state. Prints one markdown table:

| scenario | system | commit | process s | run s | final acc | speed-up |

* **process s**: launch → exit of the ``raysfl run`` process (interpreter, imports, Ray's start, the actors,
  the data, the run, shutdown): what a user waits for.
* **run s**: the run's own ``wall_s`` from ``summary.json`` (engine start → last evaluation).
* **speed-up**: baseline ÷ current of the medians of process s (and of run s, in brackets). Each run's
  own two times are printed to stderr as it ends and kept in ``--json`` (``runs``: [process s, run s]).
* **final acc**: the two systems do the same work, so the final accuracies must agree; a row whose
  accuracy differs from the baseline's is marked, since then the timings do not compare like with like.
* **variants** (``--variant NAME::key=value,...``): this checkout again with extra overrides, for an option
  that changes numbers by design (``low-rank::algorithm.params.sampler="low-rank"``); its accuracy is
  expected to differ and is marked "(option)" instead.

Setting up a baseline (outside the repository, never committed)::

    git worktree add /tmp/raysfl-base 47d0c5e
    python3 -m venv /tmp/raysfl-base/.venv
    /tmp/raysfl-base/.venv/bin/pip install -c constraints-cpu.txt -e /tmp/raysfl-base

Usage::

    python benchmarks/side_by_side.py --baseline /tmp/raysfl-base [--repeats 1] [--data-dir DIR]
        [--scenario FILE[::key=value,...]] ... [--variant NAME::key=value,...] ... [--extra ARG ...]
        [--json FILE]

Without ``--scenario`` it runs issue 17's two GAS scenarios: ``scenarios/bench/gas_reference_options.toml``
(the reference code's options, 10 global iterations) and ``scenarios/default.toml``. A scenario's
overrides follow ``::``, comma-separated (``scenarios/default.toml::train.global_iterations=1``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SCENARIOS = ("scenarios/bench/gas_reference_options.toml", "scenarios/default.toml")


def parse_scenario(text: str) -> tuple[str, list[str]]:
    """``FILE::k=v,k=v`` → (FILE, [k=v, k=v])."""
    path, _, rest = text.partition("::")
    return path, [kv for kv in rest.split(",") if kv]


def commit_of(checkout: Path) -> str:
    """The short commit of a checkout (``+dirty`` when its tracked files differ from it)."""
    rev = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(checkout), "diff", "--quiet", "HEAD"]).returncode != 0
    return (rev or "?") + ("+dirty" if dirty else "")


def raysfl_command(checkout: Path) -> str:
    """The ``raysfl`` entry point of a checkout's virtualenv (``.venv/bin/raysfl``).

    This checkout may also run from the interpreter running this script (its ``raysfl`` beside it).
    """
    exe = checkout / ".venv" / "bin" / "raysfl"
    if not exe.is_file() and checkout.resolve() == ROOT:
        exe = Path(sys.executable).parent / "raysfl"
    if not exe.is_file():
        raise SystemExit(f"side_by_side: {exe} not found: install the checkout into {checkout}/.venv first")
    return str(exe)


def run_once(
    checkout: Path, scenario: str, overrides: Sequence[str], extra: Sequence[str], data_dir: str | None
) -> dict[str, Any]:
    """One ``raysfl run`` of ``scenario`` by ``checkout``'s raysfl in a fresh process; its timings."""
    with tempfile.TemporaryDirectory(prefix="side_by_side_") as tmp:
        out = Path(tmp) / "run"
        cmd = [raysfl_command(checkout), "run", str(ROOT / scenario), *overrides, "--out", str(out), *extra]
        if data_dir:
            cmd += ["--data-dir", data_dir]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True)
        process_s = time.perf_counter() - t0
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise SystemExit(f"side_by_side: {' '.join(cmd)} failed ({proc.returncode}):\n" + "\n".join(tail))
        summary = json.loads((out / "summary.json").read_text())
    return {"process_s": process_s, "run_s": float(summary["wall_s"]), "acc": summary["final_accuracy"]}


def measure(
    systems: dict[str, tuple[Path, list[str]]],
    scenarios: Sequence[str],
    repeats: int,
    extra: Sequence[str],
    data_dir: str | None,
) -> list[dict[str, Any]]:
    """Every scenario ``repeats`` times by every system in alternation; one row per (scenario, system).

    ``systems`` maps a name to (checkout, overrides of that system alone, after the scenario's).
    """
    rows = []
    for text in scenarios:
        scenario, overrides = parse_scenario(text)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in systems}
        for r in range(repeats):
            for name, (checkout, own) in systems.items():
                print(f"side_by_side: {text} by {name} ({r + 1}/{repeats})", file=sys.stderr, flush=True)
                one = run_once(checkout, scenario, [*overrides, *own], extra, data_dir)
                runs[name].append(one)
                print(
                    f"side_by_side:   process {one['process_s']:.1f} s, run {one['run_s']:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
        for name, (checkout, _) in systems.items():
            rs = runs[name]
            rows.append(
                {
                    "scenario": text,
                    "system": name,
                    "commit": commit_of(checkout),
                    "process_s": statistics.median(r["process_s"] for r in rs),
                    "run_s": statistics.median(r["run_s"] for r in rs),
                    "acc": rs[-1]["acc"],
                    "repeats": len(rs),
                    "runs": [[r["process_s"], r["run_s"]] for r in rs],  # in order: the spread
                }
            )
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The markdown table; speed-ups are baseline ÷ current per scenario."""
    base = {r["scenario"]: r for r in rows if r["system"] == "baseline"}
    lines = [
        "| scenario | system | commit | process s | run s | final acc | speed-up (process, [run]) |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for r in rows:
        b = base.get(r["scenario"])
        speed = ""
        if b is not None and r["system"] != "baseline":
            speed = f"{b['process_s'] / r['process_s']:.2f}× [{b['run_s'] / r['run_s']:.2f}×]"
        mark = " (option)" if r["system"] not in ("baseline", "current") else " (differs!)"
        acc = f"{r['acc']:.4f}" + (mark if b is not None and r["acc"] != b["acc"] else "")
        lines.append(
            f"| `{r['scenario']}` | {r['system']} | {r['commit']} | {r['process_s']:.1f} | {r['run_s']:.1f} "
            f"| {acc} | {speed} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", required=True, type=Path, help="checkout of the baseline, with its .venv")
    ap.add_argument("--current", type=Path, default=ROOT, help="checkout to compare (default: this one)")
    ap.add_argument("--scenario", action="append", help="FILE[::key=value,...] (repeatable)")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME::key=value,... : this checkout again with these overrides (repeatable)",
    )
    ap.add_argument("--repeats", type=int, default=1, help="runs of each system per scenario (median)")
    ap.add_argument("--extra", action="append", default=[], help="extra argument for raysfl run")
    ap.add_argument("--data-dir", default=None, help="passed to raysfl run")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args(argv)
    current = args.current.resolve()
    systems = {"baseline": (args.baseline.resolve(), []), "current": (current, [])}
    for text in args.variant:
        name, overrides = parse_scenario(text)
        if not name or not overrides or name in systems:
            raise SystemExit(f"side_by_side: --variant {text!r}: expected a new NAME::key=value,...")
        systems[name] = (current, overrides)
    rows = measure(systems, args.scenario or DEFAULT_SCENARIOS, args.repeats, args.extra, args.data_dir)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
