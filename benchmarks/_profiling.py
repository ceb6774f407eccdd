"""Shared code of ``profile_gas.py`` and ``profile_fl.py``: run a scenario with :mod:`raysfl.profiling` on,
then print where the wall time went, the FLOPs of the model passes and the rate they ran at.

Every process of the run is a *lane*: ``process`` on the local backend (coordinator, pool and server in
one process); ``driver``, ``server`` and ``poolN`` on Ray. A lane's rows are the *exclusive* times of its
sections (a section's time minus the sections inside it), so they add up, with ``unaccounted`` (time in no
section), to the lane's wall time. On Ray each actor lane adds the phases of Ray's own task timeline
(argument deserialisation = fetching and unpickling the inputs from the object store; result storing =
pickling and putting the output) and ``idle`` (waiting for the next call).

FLOPs: each model pass the run timed carries its batch size; ``FlopCounterMode`` counts one pass of each
kind and batch size on the scenario's model (the counted ops, matmul and convolution, are linear in the batch,
so batches above 64 are counted at 64 and scaled). The peak is measured here, with the thread counts the
run's pools and server use: a float32 matmul and a 3×3 convolution (forward) in a loop.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from raysfl import profiling
from raysfl.engine.hosts import build_model
from raysfl.engine.runner import prepare, run
from raysfl.models.precision import PRECISIONS
from raysfl.scenario import Scenario, load_scenario

ROOT = Path(__file__).resolve().parents[1]

# What each section measures (the rows of the table); a name not listed is described generically.
DESCRIPTIONS = {
    "setup.prepare": "setup: data load, partition, devices, model FLOP profile",
    "setup.ray_init": "setup: start / join Ray",
    "setup.backend": "setup: hosts / actors, data into the object store",
    "teardown": "teardown: close logs, stop actors",
    "profiling.collect": "profiling: gather actor reports and Ray's task timeline",
    "coordinator": "coordinator / engine: event heap, clock, dispatch",
    "coordinator.policy": "coordinator: the method's policy",
    "coordinator.sinks": "coordinator: event / metric logs, TensorBoard, progress",
    "ray.submit": "Ray: submit actor calls (pickles small arguments)",
    "ray.backpressure_wait": "Ray: backpressure wait (max_inflight reached)",
    "ray.fetch": "Ray: fetch a value (evaluation, data-dependent time)",
    "ray.drain": "Ray: wait for the last calls",
    "client.data": "client: minibatch indexing and augmentation",
    "client.forward": "client forward (to the cut layer)",
    "client.backward": "client backward (recomputed forward + backward)",
    "client.forward_backward": "client forward + backward (full model)",
    "client.optimizer": "client: gradient clip + optimizer step",
    "client.merge": "client: fresh-model merge (FedASMU Eqs. 9-11: two forwards, one backward)",
    "client.carry_state": "client: a roaming client's state out of its call (least-loaded placement)",
    "server.grad": "server input-gradient passes (G_k)",
    "server.update": "server update steps (w_s)",
    "server.stats": "statistics updates (mean / covariance)",
    "server.cholesky": "covariance factorisations (Cholesky)",
    "server.sample": "sampling of generated activations",
    "server.dissimilarity": "gradient-dissimilarity measurements (GAS diagnostic)",
    "server.aggregate": "aggregation of client models",
    "eval.forward": "test-set evaluation passes",
    "ray.deserialize_arguments": "Ray: fetch + unpickle call arguments (object store)",
    "ray.store_outputs": "Ray: pickle + put results (object store)",
    "ray.worker_glue": "Ray: worker time around the call (execute − sections)",
    "idle": "idle: waiting for the next call",
    "unaccounted": "unaccounted (in no section)",
}

# Model passes whose FLOPs are counted, and how one pass of a batch is run (see _pass).
PASSES = (
    "client.forward",
    "client.backward",
    "client.forward_backward",
    "server.grad",
    "server.update",
    "eval.forward",
)


def describe(name: str) -> str:
    """The table's description of a section."""
    if name in DESCRIPTIONS:
        return DESCRIPTIONS[name]
    role, _, method = name.partition(".")
    if role in ("client", "server") and method:
        return f"{role} call {method}: glue around the parts below (copies, buffers, device moves)"
    return name


def parse_args(doc: str, default_scenario: str, default_iterations: int, argv: Sequence[str] | None) -> Any:
    """The scripts' common command line."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default=default_scenario, help="scenario TOML (default: %(default)s)")
    ap.add_argument(
        "--iterations", type=int, default=default_iterations, help="train.global_iterations (%(default)s)"
    )
    ap.add_argument("--backend", choices=("local", "ray"), default="local")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="scenario override")
    ap.add_argument("--data-dir", default=None, help="dataset root (default: RAYSFL_DATA / the search order)")
    ap.add_argument("--out", default=None, help="run directory (default: a temporary one, deleted)")
    ap.add_argument("--json", default=None, help="also write the raw profile as JSON here")
    ap.add_argument(
        "--peak-seconds", type=float, default=1.0, help="time per peak microbenchmark (0 = skip them)"
    )
    return ap.parse_args(argv)


def load(args: Any) -> Scenario:
    """The scenario with the command line's overrides; progress line and TensorBoard off."""
    overrides = [
        f"train.global_iterations={args.iterations}",
        "metrics.progress=false",
        "metrics.tensorboard=false",
        *args.set,
    ]
    return load_scenario(args.scenario, overrides)


def profile_run(sc: Scenario, backend: str, data_dir: str | None, out: str | None) -> dict[str, Any]:
    """Run ``sc`` with profiling on in this process (and, on Ray, in every actor); the raw report."""
    if profiling.enabled():
        raise RuntimeError("profiling is already on in this process")
    profiling.enable("process" if backend == "local" else "driver")
    try:
        if out is None:
            with tempfile.TemporaryDirectory(prefix="raysfl-profile-") as tmp:
                summary = run(sc, Path(tmp) / "run", backend=backend, data_dir=data_dir)
        else:
            summary = run(sc, out, backend=backend, data_dir=data_dir)
    finally:
        prof = profiling.disable()
    assert prof is not None
    report = prof.report()
    report["summary"] = {
        k: summary.get(k) for k in ("events", "global_iterations", "final_accuracy", "wall_s")
    }
    report["backend"] = backend
    report["threads"] = {"pools": sc.engine.torch_threads, "server": sc.engine.server_threads}
    return report


# --- the breakdown ------------------------------------------------------------------------------------
@dataclass
class Row:
    """One line of a lane: a section (or a derived part), its calls and seconds."""

    name: str
    calls: int | None
    seconds: float


def lane_rows(lane: dict[str, Any]) -> tuple[list[Row], float]:
    """The rows of one lane, largest first, ending with ``unaccounted`` (and on Ray actors ``idle``).

    Their seconds add up to the returned total (the lane's wall time).
    """
    wall = float(lane["wall_s"])
    sections = lane["sections"]
    rows = [Row(n, int(s["calls"]), float(s["exclusive_s"])) for n, s in sections.items()]
    accounted = sum(r.seconds for r in rows)
    phases = lane.get("ray_phases")
    if phases is not None:  # a Ray actor: Ray's phases around our sections, the rest is idle
        execute = phases.get("task:execute", {"calls": 0, "s": 0.0})
        for cat in ("task:deserialize_arguments", "task:store_outputs"):
            ph = phases.get(cat, {"calls": 0, "s": 0.0})
            rows.append(Row("ray." + cat.removeprefix("task:"), int(ph["calls"]), float(ph["s"])))
        rows.append(
            Row("ray.worker_glue", int(execute["calls"]), float(execute["s"]) - float(lane["outer_s"]))
        )
        accounted = sum(r.seconds for r in rows)
        rows.append(Row("idle", None, wall - accounted))
    else:
        rows.append(Row("unaccounted", None, wall - accounted))
    rows.sort(key=lambda r: (r.name in ("idle", "unaccounted"), -r.seconds))
    return rows, wall


def lanes_of(report: dict[str, Any]) -> list[dict[str, Any]]:
    """This process's lane, then those of the actors (Ray)."""
    return [report, *report.get("lanes", [])]


def breakdown_table(report: dict[str, Any]) -> str:
    """The markdown table of every lane; each lane closes with a ``total`` row equal to its wall time."""
    lines = [
        "| lane | part | section | calls | total s | share % | mean ms |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for lane in lanes_of(report):
        rows, wall = lane_rows(lane)
        for r in rows:
            share = 100.0 * r.seconds / wall if wall > 0 else 0.0
            mean = f"{1e3 * r.seconds / r.calls:.3f}" if r.calls else ""
            calls = "" if r.calls is None else str(r.calls)
            lines.append(
                f"| {lane['lane']} | {describe(r.name)} | `{r.name}` | {calls} | {r.seconds:.3f} | "
                f"{share:.1f} | {mean} |"
            )
        lines.append(f"| {lane['lane']} | **total (wall)** | | | {wall:.3f} | 100.0 | |")
    return "\n".join(lines)


# --- FLOPs and rates ----------------------------------------------------------------------------------
def _pass(kind: str, model: Any, input_shape: Sequence[int], batch: int) -> Callable[[], None]:
    """One model pass of ``kind`` on ``batch`` samples, as the run does it."""
    x = torch.randn(batch, *input_shape)
    y = torch.zeros(batch, dtype=torch.int64)
    client, server = model.client, model.server
    with torch.no_grad():
        acts = client(x)

    def run_pass() -> None:
        if kind == "client.forward":
            with torch.no_grad():
                client(x)
        elif kind == "client.backward":
            out = client(x)
            out.backward(torch.ones_like(out))
        elif kind == "client.forward_backward":
            F.cross_entropy(server(client(x)), y).backward()
        elif kind == "server.grad":  # the gradient of the input only, as autograd.grad(loss, a) computes
            a = acts.detach().requires_grad_(True)
            weights = [p for p in server.parameters() if p.requires_grad]
            for p in weights:  # (FlopCounterMode's module hooks reject autograd.grad on a leaf)
                p.requires_grad_(False)
            try:
                F.cross_entropy(server(a), y).backward()
            finally:
                for p in weights:
                    p.requires_grad_(True)
        elif kind == "server.update":
            F.cross_entropy(server(acts), y).backward()
        elif kind == "eval.forward":
            with torch.no_grad():
                server(client(x))
        else:
            raise ValueError(kind)

    return run_pass


def count_flops(
    sc: Scenario, batches: dict[str, dict[int, int]], data_dir: str | None = None
) -> dict[str, float]:
    """Total FLOPs per pass kind: FLOPs of one pass per batch size (FlopCounterMode) × the run's calls."""
    prep = prepare(sc, data_dir)
    model = build_model(prep.setup)
    model.client.train()
    model.server.train()
    cache: dict[tuple[str, int], float] = {}
    totals: dict[str, float] = {}
    for kind, hist in batches.items():
        if kind not in PASSES:
            continue
        for batch, calls in hist.items():
            counted = min(int(batch), 64)
            if (kind, counted) not in cache:
                fn = _pass(kind, model, prep.setup.input_shape, counted)
                counter = FlopCounterMode(display=False)
                with counter:
                    fn()
                cache[(kind, counted)] = float(counter.get_total_flops())
            totals[kind] = totals.get(kind, 0.0) + calls * cache[(kind, counted)] * batch / counted
    return totals


def merged_batches(report: dict[str, Any]) -> dict[str, dict[int, int]]:
    """The batch-size histograms of every lane, summed."""
    out: dict[str, dict[int, int]] = {}
    for lane in lanes_of(report):
        for name, hist in lane.get("batches", {}).items():
            acc = out.setdefault(name, {})
            for b, n in hist.items():
                acc[int(b)] = acc.get(int(b), 0) + int(n)
    return out


def section_seconds(report: dict[str, Any], name: str) -> float:
    """Exclusive seconds of ``name`` over every lane."""
    return sum(float(lane["sections"].get(name, {}).get("exclusive_s", 0.0)) for lane in lanes_of(report))


def _rate(fn: Callable[[], Any], flops: float, seconds: float) -> float:
    """GFLOP/s of ``fn`` (``flops`` per call), looped for about ``seconds`` after one warm-up call."""
    fn()
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return n * flops / elapsed / 1e9


def measure_peaks(threads: Iterable[int], seconds: float, precision: str = "float32") -> dict[str, float]:
    """Peak GFLOP/s of this machine per thread count: a 1024² matmul and a 3×3 convolution, in the run's
    ``engine.precision`` (``"bfloat16"``: float32 operands under bfloat16 autocast, as the run's layers)."""
    out: dict[str, float] = {}
    before = torch.get_num_threads()
    low = PRECISIONS[precision]  # the autocast dtype, None for float32
    try:
        for t in sorted(set(threads)):
            torch.set_num_threads(t)
            a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
            x, w = torch.randn(32, 64, 28, 28), torch.randn(128, 64, 3, 3)
            with torch.autocast("cpu", dtype=low, enabled=low is not None):
                out[f"matmul 1024² {precision}, {t} thread(s)"] = _rate(
                    partial(torch.matmul, a, b), 2 * 1024**3, seconds
                )
                out[f"conv 3×3 64→128, 32×28×28, {precision}, {t} thread(s)"] = _rate(
                    partial(F.conv2d, x, w, padding=1), 2 * 32 * 128 * 28 * 28 * 64 * 9, seconds
                )
    finally:
        torch.set_num_threads(before)
    return out


def flops_table(
    sc: Scenario, report: dict[str, Any], peaks: dict[str, float], data_dir: str | None = None
) -> str:
    """Per pass kind: passes, GFLOP, seconds, achieved GFLOP/s; then the measured peaks."""
    flops = count_flops(sc, merged_batches(report), data_dir)
    lines = ["| model pass | passes | GFLOP | s | GFLOP/s |", "|---|---:|---:|---:|---:|"]
    total_f = total_s = 0.0
    batches = merged_batches(report)
    for kind in PASSES:
        if kind not in flops:
            continue
        s = section_seconds(report, kind)
        passes = sum(batches[kind].values())
        total_f += flops[kind]
        total_s += s
        rate = flops[kind] / s / 1e9 if s > 0 else math.nan
        lines.append(f"| `{kind}` | {passes} | {flops[kind] / 1e9:.2f} | {s:.3f} | {rate:.1f} |")
    rate = total_f / total_s / 1e9 if total_s > 0 else math.nan
    lines.append(f"| **all model passes** | | {total_f / 1e9:.2f} | {total_s:.3f} | {rate:.1f} |")
    wall = float(report["wall_s"])
    lines.append(
        f"| **over the run's wall time** | | {total_f / 1e9:.2f} | {wall:.3f} | {total_f / wall / 1e9:.1f} |"
    )
    if peaks:
        lines += ["", "| peak microbenchmark | GFLOP/s |", "|---|---:|"]
        lines += [f"| {name} | {rate:.1f} |" for name, rate in peaks.items()]
    return "\n".join(lines)


def main(doc: str, default_scenario: str, default_iterations: int, argv: Sequence[str] | None = None) -> int:
    """Parse the command line, run the profile, print the two tables (and write the JSON if asked)."""
    args = parse_args(doc, default_scenario, default_iterations, argv)
    sc = load(args)
    report = profile_run(sc, args.backend, args.data_dir, args.out)
    threads = {sc.engine.torch_threads, sc.engine.server_threads}
    peaks = measure_peaks(threads, args.peak_seconds, sc.engine.precision) if args.peak_seconds > 0 else {}
    cpu = os.cpu_count()
    print(
        f"## Profile of {sc.name} ({args.backend} backend, {args.iterations} global iterations, {cpu} CPUs)\n"
    )
    s = report["summary"]
    print(
        f"events {s['events']}, global iterations {s['global_iterations']}, final accuracy "
        f"{s['final_accuracy']}, wall {report['wall_s']:.1f} s, "
        f"threads: pools {sc.engine.torch_threads}, server {sc.engine.server_threads}\n"
    )
    print(breakdown_table(report))
    print()
    print(flops_table(sc, report, peaks, args.data_dir))
    if args.backend == "local" and torch.cuda.is_available() and torch.cuda.is_initialized():
        # The local backend's server runs in this process, so its device's allocator saw the whole run.
        peak = torch.cuda.max_memory_allocated() / 2**30
        print(f"\nGPU memory: peak allocated by torch in this process {peak:.2f} GiB")
    if args.json:
        report["peaks"] = peaks
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    sys.stdout.flush()
    return 0
