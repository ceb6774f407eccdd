"""Sweep overhead: a 4-trial `raysfl sweep` on Ray Tune against the same 4 runs through `raysfl run`.

The scenario is small and real: GAS on Fashion-MNIST with LeNet-5 (K = 10, C = 5, E = 5, T = 4). The four
trials are two seeds × two methods (GAS, FedAvg). Three ways of running them, one after another, each a
fresh process on an idle machine:

    separate runs   four `raysfl run SCENARIO` commands one after another (four Ray start-ups)
    one run command `raysfl run DIR` on a folder of the four scenarios (one driver, one Ray start-up)
    sweep           `raysfl sweep SWEEP.toml` (one driver, Ray Tune, one placement group per trial)

What a way of running adds to the runs themselves is its total wall time minus the sum of its runs' own
wall times (summary.json ``wall_s``: data, actors, training, evaluation), per trial. The sweep's added wall
time per trial is that figure for the sweep minus that for the one run command (Ray Tune, placement groups
and trial processes, against one plain driver), set against the mean wall time of a trial run separately.
Differencing the time outside the runs keeps the figure meaningful when another job shares the cores and
stretches the runs themselves; the table gives the raw totals too. The issue's target is ≤ 10 %.

Usage (prints a markdown table; needs Fashion-MNIST, e.g. RAYSFL_DATA=../shared/data):
    python benchmarks/sweep_overhead.py [--data-dir DIR] [--iterations 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE = """name = "bench"
seed = 1
[data]
dataset = "fashion-mnist"
partition = "shard"
shards_per_client = 2
[model]
name = "lenet5"
[federation]
num_clients = 10
active_clients = 5
[train]
global_iterations = {iterations}
local_iterations = 5
batch_size = 32
lr = 0.01
momentum = 0.9
[algorithm]
name = "gas"
[algorithm.params]
q_s = 5
q_c = 5
covariance = "diagonal"
[metrics]
progress = false
"""

SWEEP = """base = "bench.toml"
[link.method]
"algorithm.name" = ["gas", "fedavg"]
"algorithm.params" = [{ q_s = 5, q_c = 5, covariance = "diagonal" }, {}]
[grid]
seed = [1, 2]
"""
TRIALS = [("gas", 1), ("gas", 2), ("fedavg", 1), ("fedavg", 2)]


def raysfl(*args: str) -> float:
    """Run the raysfl command line in a fresh process; its wall time in seconds."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "raysfl.cli", *args], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def trial_scenario(root: Path, method: str, seed: int, iterations: int) -> Path:
    """The scenario file of one trial, equal to what the sweep builds."""
    text = BASE.format(iterations=iterations).replace('name = "bench"', f'name = "{method}_seed{seed}"')
    text = text.replace("seed = 1", f"seed = {seed}", 1)
    if method == "fedavg":
        text = text.split("[algorithm]")[0] + '[algorithm]\nname = "fedavg"\n[metrics]\nprogress = false\n'
    path = root / "scenarios" / f"{method}_seed{seed}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def trial_walls(folder: Path) -> list[float]:
    """``wall_s`` of every run's summary.json below ``folder``."""
    return [json.loads(p.read_text())["wall_s"] for p in sorted(folder.glob("*/summary.json"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="where Fashion-MNIST is (else $RAYSFL_DATA or the default search)")
    parser.add_argument("--iterations", type=int, default=4, help="global iterations per trial")
    args = parser.parse_args()
    if args.data_dir:
        os.environ["RAYSFL_DATA"] = str(Path(args.data_dir).resolve())
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "bench.toml").write_text(BASE.format(iterations=args.iterations))
        (root / "bench.sweep.toml").write_text(SWEEP)
        files = [trial_scenario(root, m, s, args.iterations) for m, s in TRIALS]
        separate = sum(raysfl("run", str(f), "--out", str(root / "separate" / f.stem)) for f in files)
        one_command = raysfl("run", str(root / "scenarios"), "--out", str(root / "one"))
        sweep = raysfl("sweep", str(root / "bench.sweep.toml"), "--out", str(root / "sweep"))
        walls = {
            "separate runs": trial_walls(root / "separate"),
            "one run command": trial_walls(root / "one"),
            "sweep": trial_walls(root / "sweep"),
        }
    outside = {
        "separate runs": (separate - sum(walls["separate runs"])) / len(TRIALS),
        "one run command": (one_command - sum(walls["one run command"])) / len(TRIALS),
        "sweep": (sweep - sum(walls["sweep"])) / len(TRIALS),
    }
    trial_wall = sum(walls["separate runs"]) / len(TRIALS)
    added = outside["sweep"] - outside["one run command"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"4 trials (GAS and FedAvg × 2 seeds), LeNet-5 / Fashion-MNIST, T = {args.iterations}, "
        f"{os.cpu_count()} CPUs"
    )
    print()
    print("| how | total wall s | mean trial wall s (summary.json) | wall s per trial outside the runs |")
    print("|---|---|---|---|")
    for name, total in (("separate runs", separate), ("one run command", one_command), ("sweep", sweep)):
        mean = sum(walls[name]) / len(walls[name])
        print(f"| {name} | {total:.1f} | {mean:.1f} | {outside[name]:.1f} |")
    print()
    print(
        f"sweep's added wall time per trial (outside the runs, vs one run command): {added:+.1f} s = "
        f"{100 * added / trial_wall:+.1f} % of a separately run trial's {trial_wall:.1f} s (target ≤ 10 %); "
        f"1-min load average at the end {load:.2f}"
    )


if __name__ == "__main__":
    main()
