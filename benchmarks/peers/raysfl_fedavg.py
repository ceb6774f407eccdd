"""The raysfl side of the FedAvg peer benchmark: ``raysfl run`` of the peer scenario, timed like the peers.

Runs ``scenarios/bench/fedavg_peer.toml`` (with the given ``key=value`` overrides) on Ray exactly as
``raysfl run SCENARIO key=value ... --out DIR`` does (``raysfl.engine.runner.run`` on an embedded local
Ray, stopped at the end), writing the run's outputs to a temporary folder (or ``--out``), and adds the
timings raysfl does not report itself (see ``fedavg_work``):

* the first round's start: the start of the first ``ClientPool.call`` or ``ClientPool.call_carried`` task
  (the first client job; the second with ``engine.placement = "least-loaded"``, the default) in Ray's
  task timeline (``ray.timeline()``), read before Ray stops. Workers report their task events every
  ``RAY_task_events_report_interval_ms`` (Ray's default 1 s; this script sets 100 ms unless the variable is
  set): the run kills its actors when it ends, and a pool that ends within one report interval of its
  first task (a tiny run) would take that task's events with it. A report is a small message, not work;
* the last evaluation's end: when the driver receives the final evaluation (the last report of the run,
  fetched by the coordinator's final drain right when it is done).

raysfl's FL policies submit round 1's model requests (``send_model``) before the initial evaluation, and
the server runs its calls in order, so round 1 trains while the server evaluates the initial model (Flower's
round 1 waits for its initial evaluation); the start-up excludes that evaluation, the total does not.

Usage (prints a one-row markdown table):
    python benchmarks/peers/raysfl_fedavg.py [key=value ...] [--data-dir DIR] [--out DIR] [--result FILE]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import fedavg_work as fw

POOL_TASKS = ("task::ClientPool.call", "task::ClientPool.call_carried")
EVENTS_VAR = "RAY_task_events_report_interval_ms"


class _LastEval:
    """A raysfl sink that notes the wall time at which each evaluation reaches the driver."""

    def __init__(self) -> None:
        self.rows: list[tuple[float, dict[str, Any]]] = []

    def on_event(self, row: Mapping[str, Any]) -> None:
        """Event rows are not needed."""

    def on_eval(self, row: dict[str, Any]) -> None:
        """Remember when this evaluation arrived."""
        self.rows.append((time.time(), row))

    def close(self) -> None:
        """Nothing to close."""


def first_pool_task_start(events: list[dict[str, Any]]) -> float | None:
    """Wall time (s) when the first client job (a ``POOL_TASKS`` task) started, from ``ray.timeline()``."""
    starts = [float(e["ts"]) / 1e6 for e in events if e.get("cat") in POOL_TASKS and "ts" in e]
    return min(starts) if starts else None


def run(
    overrides: Sequence[str] = (),
    scenario: str | None = None,
    data_dir: str | None = None,
    out: str | None = None,
) -> dict[str, Any]:
    """Run the peer scenario with raysfl on Ray; returns the result row (:func:`fedavg_work.result`)."""
    import ray

    from raysfl.engine import cluster
    from raysfl.engine.runner import run as raysfl_run

    os.environ.pop("RAY_ADDRESS", None)  # an embedded Ray of its own, as `raysfl run` without --address
    os.environ.setdefault(EVENTS_VAR, "100")  # read by every Ray process this run starts (see above)
    sc = fw.load(scenario, overrides)
    sink = _LastEval()
    waited = 0.0
    with tempfile.TemporaryDirectory(prefix="raysfl-peer-") as tmp:
        try:
            summary = raysfl_run(
                sc,
                Path(out) if out else Path(tmp) / sc.name,
                backend="ray",
                data_dir=data_dir,
                extra_sinks=[sink],
            )
            w0 = time.time()
            time.sleep(1.5)  # workers report task events to the GCS about once a second
            first = first_pool_task_start(ray.timeline()) if ray.is_initialized() else None
            waited = time.time() - w0  # the benchmark's own wait, taken off the total below
        finally:
            cluster.shutdown_ray()
    if first is None:
        raise RuntimeError("Ray's task timeline holds no client job (a ClientPool task); cannot time round 1")
    last_eval = sink.rows[-1][0] if sink.rows else float("nan")
    eng = sc.engine
    return fw.result(
        f"raysfl (Ray, {eng.pools} pools x {eng.torch_threads} thread)",
        first,
        last_eval,
        summary.get("final_accuracy"),
        int(summary.get("global_iterations") or sc.train.global_iterations),
        end=time.time() - waited,
        loss=sink.rows[-1][1].get("loss") if sink.rows else None,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    fw.add_arguments(parser)
    parser.add_argument(
        "--out", default=None, help="keep the run's outputs here (default: a temporary folder)"
    )
    args = parser.parse_args(argv)
    row = run(args.overrides, args.scenario, args.data_dir, args.out)
    fw.report(row, args.result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
