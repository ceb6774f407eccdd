"""Run the FedAvg peer benchmark's three systems one after another and print one markdown table.

raysfl (``raysfl_fedavg.py``, this interpreter), Flower (``flower_fedavg.py``, the Flower virtualenv's
interpreter) and the plain loop (``plain_fedavg.py``, this interpreter), each in a fresh process launched
with ``RAYSFL_PEER_T0`` set to its launch time, so every start-up counts the interpreter, the imports and
everything else up to the first round. The same ``key=value`` overrides go to all three. Each system's
output goes to ``--logs`` (default: a temporary folder, removed at the end). See README.md beside this file.

Usage:
    python benchmarks/peers/run_all.py [key=value ...] [--flower-python PATH] [--only raysfl,flower,plain]
        [--data-dir DIR] [--logs DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SYSTEMS = ("raysfl", "flower", "plain")
SCRIPTS = {"raysfl": "raysfl_fedavg.py", "flower": "flower_fedavg.py", "plain": "plain_fedavg.py"}
FLOWER_PYTHON = os.environ.get("FLOWER_PYTHON", "/tmp/flower-venv/bin/python")


def command(
    system: str, python: str, overrides: Sequence[str], args: argparse.Namespace, out: Path
) -> list[str]:
    """The command line that runs ``system`` and writes its row to ``out``."""
    cmd = [python, str(HERE / SCRIPTS[system]), *overrides, "--scenario", args.scenario, "--result", str(out)]
    if args.data_dir:
        cmd += ["--data-dir", args.data_dir]
    if system == "flower":
        cmd += ["--actors", str(args.flower_actors), "--cpus", str(args.flower_cpus)]
    if system == "plain" and args.plain_threads:
        cmd += ["--threads", str(args.plain_threads)]
    return cmd


def run_one(
    system: str, python: str, overrides: Sequence[str], args: argparse.Namespace, logs: Path
) -> dict[str, Any]:
    """Launch one system, wait for it, return its row (or a row saying why there is none)."""
    out, log = logs / f"{system}.json", logs / f"{system}.log"
    cmd = command(system, python, overrides, args, out)
    print(f"run_all: {system}: {' '.join(cmd)} (output: {log})", file=sys.stderr, flush=True)
    with open(log, "w") as fh:
        env = {**os.environ, "RAYSFL_PEER_T0": repr(time.time())}
        rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=HERE.parents[1]).returncode
    if rc == 0 and out.is_file():
        return json.loads(out.read_text())
    tail = log.read_text().strip().splitlines()[-1:] or [""]
    print(f"run_all: {system} failed (exit {rc}): {tail[0]}", file=sys.stderr, flush=True)
    return {
        "system": f"{system} (failed, exit {rc}; see {log})",
        "startup_s": None,
        "per_round_s": None,
        "total_s": None,
        "accuracy": None,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module docstring."""
    sys.path.insert(0, str(HERE))
    import fedavg_work as fw

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    fw.add_arguments(parser)
    parser.add_argument(
        "--flower-python", default=FLOWER_PYTHON, help="the Flower venv's python (%(default)s)"
    )
    parser.add_argument("--flower-actors", type=int, default=2, help="Flower's Ray actors (default 2)")
    parser.add_argument("--flower-cpus", type=int, default=1, help="CPUs per Flower actor (default 1)")
    parser.add_argument(
        "--plain-threads", type=int, default=None, help="torch threads of the plain loop (all)"
    )
    parser.add_argument(
        "--only", default=",".join(SYSTEMS), help="systems to run, in this order (%(default)s)"
    )
    parser.add_argument("--logs", default=None, help="keep each system's output here (default: removed)")
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SYSTEMS))
    if unknown:
        parser.error(f"--only: unknown systems {unknown}; choose from {', '.join(SYSTEMS)}")
    if "flower" in chosen and not Path(args.flower_python).is_file():
        parser.error(
            f"--flower-python {args.flower_python} does not exist; set up the Flower venv (README.md)"
        )
    fw.load(args.scenario, args.overrides)  # a bad scenario or override fails here, before anything runs
    rows = []
    with tempfile.TemporaryDirectory(prefix="raysfl-peers-") as tmp:
        logs = Path(args.logs or tmp)
        logs.mkdir(parents=True, exist_ok=True)
        for system in chosen:
            python = args.flower_python if system == "flower" else sys.executable
            rows.append(run_one(system, python, args.overrides, args, logs))
    print(fw.table(rows), flush=True)
    return 0 if all(r.get("total_s") is not None for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
