"""The FedAvg peer benchmark's compute bound: its model passes alone, one thread, packed onto the cores.

Runs the peer scenario's work in one process with one torch thread (raysfl's ``FLClient.train`` for every
job, ``evaluate_split`` for every evaluation, as the three systems run them: ``fedavg_work``) and takes each
job's and each evaluation's CPU time. Their sum divided by the cores is the wall time of a system that kept
every core busy with nothing but these passes from launch to exit, with no start-up, no orchestration and
one thread per core (a core computes these passes fastest with one thread: the plain loop's two threads
take longer per round than half the one-thread time, benchmarks/RESULTS.md). No system can be faster;
``--target`` compares a wall time with it. Also lists the jobs that took over twice the median (subnormal
floats, ``engine.flush_denormal``).

Usage (prints a markdown table):
    python benchmarks/peers/compute_bound.py [key=value ...] [--cores N] [--target SECONDS] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Sequence
from typing import Any

import fedavg_work as fw


def measure(overrides: Sequence[str] = (), scenario: str | None = None, data_dir: str | None = None) -> dict:
    """CPU seconds of every job and every evaluation of the peer work, one torch thread."""
    import torch

    torch.set_num_threads(1)
    sc = fw.load(scenario, overrides)
    work = fw.build(sc, data_dir)
    trainer, evaluate = fw.Trainer(work), fw.Evaluator(work)
    due = set(fw.evaluated_rounds(sc))
    jobs_done = [0] * sc.federation.num_clients
    jobs: list[tuple[int, int, float]] = []  # (round, client, CPU s)
    evals: list[float] = []

    def timed(fn: Any, *args: Any) -> tuple[Any, float]:
        start = time.process_time()
        out = fn(*args)
        return out, time.process_time() - start

    weights = work.initial_weights()
    (accuracy, _), cpu = timed(evaluate, weights)
    evals.append(cpu)
    for r, clients in enumerate(fw.round_clients(sc), start=1):
        models = []
        for k in clients:
            model, cpu = timed(trainer.train, k, weights, jobs_done[k])
            models.append(model)
            jobs.append((r, k, cpu))
            jobs_done[k] += 1
        weights = fw.weighted_average(models, [work.client_size(k) for k in clients])
        if r in due:
            (accuracy, _), cpu = timed(evaluate, weights)
            evals.append(cpu)
    return {"jobs": jobs, "evals": evals, "accuracy": accuracy, "flush": sc.engine.flush_denormal}


def table(m: dict, cores: int, target: float | None) -> str:
    """The bound as a markdown table, with the slow jobs and, given ``target``, how it compares."""
    train = sum(c for _, _, c in m["jobs"])
    evals = sum(m["evals"])
    bound = (train + evals) / cores
    median = statistics.median(c for _, _, c in m["jobs"])
    slow = [f"round {r} client {k}: {c:.2f} s" for r, k, c in m["jobs"] if c > 2 * median]
    lines = [
        "| quantity | value |",
        "|---|---:|",
        f"| client jobs | {len(m['jobs'])} (median {median:.3f} CPU s) |",
        f"| training, CPU s (1 thread) | {train:.1f} |",
        f"| evaluations | {len(m['evals'])}, {evals:.1f} CPU s |",
        f"| **compute bound on {cores} cores (s)** | **{bound:.1f}** |",
        f"| flush_denormal | {str(m['flush']).lower()} |",
        f"| final accuracy | {m['accuracy']:.4f} |",
    ]
    if target is not None:
        verdict = "below the bound: no system can reach it" if target < bound else "above the bound"
        lines.append(f"| target {target:.1f} s | {verdict} ({target - bound:+.1f} s) |")
    lines.append(f"\nJobs over twice the median: {', '.join(slow) if slow else 'none'}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    fw.add_arguments(parser)
    parser.add_argument(
        "--cores", type=int, default=os.cpu_count() or 1, help="cores (default: this machine's)"
    )
    parser.add_argument(
        "--target", type=float, default=None, help="a wall time (s) to compare with the bound"
    )
    args = parser.parse_args(argv)
    if args.cores < 1:
        parser.error(f"--cores must be at least 1, got {args.cores}")
    print(table(measure(args.overrides, args.scenario, args.data_dir), args.cores, args.target), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
