"""A sweep of four tiny trials (GAS and FedAvg, two seeds each) and helpers to drive `raysfl sweep` in a
subprocess, shared by the sweep tests (test_sweep.py, test_sweep_failures.py). Each trial takes seconds."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from tests.scenarios import tiny_gas_toml

BASE = tiny_gas_toml(global_iterations=3)

SWEEP = """
base = "tiny.toml"
[set]
"engine.checkpoint_every" = 1
[link.method]
"algorithm.name" = ["gas", "fedavg"]
"algorithm.params" = [{ q_s = 4, q_c = 4 }, {}]
[grid]
seed = [1, 2]
"""
TRIALS = ["gas_seed1", "gas_seed2", "fedavg_seed1", "fedavg_seed2"]


def write_sweep(root: Path) -> Path:
    """The sweep file (``table.sweep.toml``) and its base scenario (``tiny.toml``) written in ``root``."""
    (root / "tiny.toml").write_text(BASE)
    (root / "table.sweep.toml").write_text(SWEEP)
    return root / "table.sweep.toml"


def rows(path: Path) -> list[dict]:
    """A parquet file's rows without the wall-clock column, which no two runs share."""
    table = pq.read_table(path)
    return table.drop([c for c in ("wall_s",) if c in table.column_names]).to_pylist()


def spawn(argv: list[str], log: Path) -> subprocess.Popen:
    """`raysfl ARGV` in a child process, its output in ``log``."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-m", "raysfl.cli", *argv], stdout=log.open("w"), stderr=subprocess.STDOUT, env=env
    )


def recorded_status(out: Path, trial: str) -> str | None:
    """A trial's status as the sweep in ``out`` has recorded it in sweep.json, or ``None`` before the file."""
    status = out / "sweep.json"
    return json.loads(status.read_text())["trials"][trial].get("status") if status.is_file() else None
