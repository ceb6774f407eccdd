"""Where the wall time of a FedAvg run goes (issue 17, part 1).

Runs a fixed FedAvg scenario (default: ``scenarios/fedasmu/table4/fmnist_lenet5_fedavg_quick.toml``, 100
clients of which 10 train 95 local iterations per round, for 2 rounds) with :mod:`raysfl.profiling` on, and
prints a markdown breakdown of the wall time per process (client data, forward + backward, optimizer steps,
aggregation, evaluation, Ray's (de)serialisation and object-store phases, coordinator, idle time per actor,
unaccounted), then the FLOPs of the model passes, the GFLOP/s they ran at and the peak of this machine.
The profiler only reads clocks: the run's numbers are those of an unprofiled run.

Usage:
    python benchmarks/profile_fl.py [--iterations 2] [--backend local|ray] [--set KEY=VALUE ...]
                                    [--scenario FILE] [--data-dir DIR] [--json FILE] [--peak-seconds 1]
"""

from __future__ import annotations

import sys

from _profiling import ROOT, main

if __name__ == "__main__":
    sys.exit(main(__doc__, str(ROOT / "scenarios/fedasmu/table4/fmnist_lenet5_fedavg_quick.toml"), 2))
