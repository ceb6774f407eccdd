"""Where the wall time of a GAS run goes (issue 17, part 1).

Runs a fixed GAS scenario (default: the reference code's options, ``scenarios/gas/reference_code.toml``,
for 2 global iterations) with :mod:`raysfl.profiling` on, and prints a markdown breakdown of the wall time
per process (client forward/backward, server input-gradient passes, server update steps, statistics
updates, Cholesky factorisations, sampling, aggregation, Ray's (de)serialisation and object-store phases,
coordinator, idle time per actor, unaccounted), then the FLOPs of the model passes, the GFLOP/s they ran
at and the peak of this machine (matmul and convolution microbenchmarks with the run's thread counts).
The profiler only reads clocks: the run's numbers are those of an unprofiled run.

Usage:
    python benchmarks/profile_gas.py [--iterations 2] [--backend local|ray] [--set KEY=VALUE ...]
                                     [--scenario FILE] [--data-dir DIR] [--json FILE] [--peak-seconds 1]
"""

from __future__ import annotations

import sys

from _profiling import ROOT, main

if __name__ == "__main__":
    sys.exit(main(__doc__, str(ROOT / "scenarios/gas/reference_code.toml"), 2))
