"""What a checkpoint costs per client state: capturing, writing and restoring K trained clients' states.

A checkpoint captures every client state a pool holds (:meth:`raysfl.engine.hosts.ClientHost.snapshot`)
into a weights-only tree and writes it; a resume rebuilds them. With 10,000 registered clients this was most
of a run's checkpoint time. This builds the FedAsync client states of ``K`` clients on the synthetic
dataset (the states a run holds once every client has trained: index arrays, batch cursor, numpy and torch
generators), then times, once each: the capture (``snapshot``), the write (``save_tree``) and the rebuild
(``restore``), and prints the file size.

Usage::

    python benchmarks/checkpoint_states.py [--clients 1000 10000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from raysfl.engine import runner
from raysfl.engine.snapshot import save_tree
from raysfl.scenario import scenario_from_dict


def scenario(clients: int) -> dict:
    """FedAsync on LeNet-5 and the synthetic dataset, ``clients`` registered (two samples each at least)."""
    return {
        "name": "checkpoint-states",
        "seed": 1,
        "data": {
            "dataset": "synthetic",
            "partition": "iid",
            "synthetic_train": max(2 * clients, 2000),
            "synthetic_test": 200,
        },
        "model": {"name": "lenet5"},
        "federation": {"num_clients": clients, "active_clients": min(50, clients)},
        "train": {"global_iterations": 1, "local_iterations": 1, "batch_size": 2},
        "algorithm": {"name": "fedasync"},
        "metrics": {"progress": False},
    }


def measure(clients: int) -> dict[str, float]:
    """Seconds to capture, write and restore ``clients`` client states, and the file's MiB."""
    prep = runner.prepare(scenario_from_dict(scenario(clients)))
    host = runner.local_dispatcher(prep).clients
    for client in range(clients):
        host.state(client)
    start = time.perf_counter()
    snap = host.snapshot()
    captured = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ckpt.pt"
        save_tree(snap, path)
        written = time.perf_counter()
        mib = path.stat().st_size / 2**20
    host.restore(snap, logic=False)
    restored = time.perf_counter()
    return {
        "capture": captured - start,
        "write": written - captured,
        "restore": restored - written,
        "mib": mib,
    }


def main() -> None:
    """Print one table row per client count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1000, 10000])
    args = parser.parse_args()
    print("| K | capture s | write s | restore s | file MiB |")
    print("|---:|---:|---:|---:|---:|")
    for k in args.clients:
        m = measure(k)
        print(f"| {k:,} | {m['capture']:.2f} | {m['write']:.2f} | {m['restore']:.2f} | {m['mib']:.1f} |")


if __name__ == "__main__":
    main()
