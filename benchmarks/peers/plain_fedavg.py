"""The lower bound of the FedAvg peer benchmark: the same work in one process, a plain PyTorch loop.

No engine, no Ray, no Flower, no events: build the data, partition and model (``fedavg_work.build``),
evaluate the initial model, then for every round train its C clients one after another (raysfl's
``FLClient.train``: E SGD steps each), average their models weighted by |D_k| and evaluate. torch uses
``--threads`` threads (default: every core). See README.md beside this file.

Usage (prints a one-row markdown table):
    python benchmarks/peers/plain_fedavg.py [key=value ...] [--threads N] [--data-dir DIR] [--result FILE]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from typing import Any

import fedavg_work as fw


def run(
    overrides: Sequence[str] = (),
    scenario: str | None = None,
    data_dir: str | None = None,
    threads: int | None = None,
) -> dict[str, Any]:
    """Run the peer scenario as a plain loop; returns the result row (:func:`fedavg_work.result`)."""
    import torch

    torch.set_num_threads(threads or os.cpu_count() or 1)
    sc = fw.load(scenario, overrides)
    work = fw.build(sc, data_dir)
    trainer = fw.Trainer(work)
    evaluate = fw.Evaluator(work)
    due = set(fw.evaluated_rounds(sc))
    jobs = [0] * sc.federation.num_clients
    weights = work.initial_weights()
    accuracy, loss = evaluate(weights)
    first_start = last_eval = time.time()
    for r, clients in enumerate(fw.round_clients(sc), start=1):
        if r == 1:
            first_start = time.time()
        models = []
        for k in clients:
            models.append(trainer.train(k, weights, jobs[k]))
            jobs[k] += 1
        weights = fw.weighted_average(models, [work.client_size(k) for k in clients])
        if r in due:
            accuracy, loss = evaluate(weights)
            last_eval = time.time()
    return fw.result(
        "plain loop (1 process)",
        first_start,
        last_eval,
        accuracy,
        sc.train.global_iterations,
        loss=loss,
        threads=torch.get_num_threads(),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    fw.add_arguments(parser)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: every core)")
    args = parser.parse_args(argv)
    row = run(args.overrides, args.scenario, args.data_dir, args.threads)
    fw.report(row, args.result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
