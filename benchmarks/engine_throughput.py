"""Engine throughput: GAS client local iterations per wall second, raysfl on Ray vs the ideal loop.

The ideal is a plain single-process loop that does exactly the same training work — the same client
forward/backward passes, logit-adjusted server gradients, statistics updates, generated activations,
server updates, aggregations and the two test evaluations — by calling the GAS logic objects directly, with
no engine, no events and no Ray, using every core for torch. The ratio ideal_wall / raysfl_wall (higher is
better; 1.0 = no overhead) is the engine's efficiency.

A scale row runs 1,000 registered clients with 100 concurrent and samples the resident memory of every
process of the run (driver, raylet, GCS, workers) every 0.5 s.

Usage (prints a markdown table):
    python benchmarks/engine_throughput.py [--data-dir DIR] [--iterations 1] [--skip-scale]
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path

import torch
from procstats import command_line, is_ray_process, rss_bytes

from raysfl.engine.hosts import ClientHost, ServerHost
from raysfl.engine.ray_token import secure_token_file
from raysfl.engine.runner import prepare, run
from raysfl.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def ideal_loop(sc, data_dir: str | None) -> tuple[float, int]:
    """Same GAS work as the engine (round-robin over the C active clients), in one process."""
    prep = prepare(sc, data_dir)
    ds = prep.dataset
    torch.set_num_threads(os.cpu_count() or 1)
    clients = ClientHost(prep.setup, ds.train_x, ds.train_y, prep.transform, threads=os.cpu_count() or 1)
    server = ServerHost(prep.setup, ds.test_x, ds.test_y, prep.transform, "cpu", threads=os.cpu_count() or 1)
    server.call("evaluate")
    t0 = time.perf_counter()  # like the engine row: from the first evaluation's end
    weights = server.call("client_weights")
    c, e_max, q_c = sc.federation.active_clients, sc.train.local_iterations, sc.params.q_c
    iterations = 0
    for round_ in range(sc.train.global_iterations):
        first = round_ * q_c
        active = [(first + i) % sc.federation.num_clients for i in range(c)]
        acts = {k: clients.call("start", k, weights) for k in active}
        finished = 0
        for e in range(1, e_max + 1):
            for k in active:
                grads = server.call("on_activations", k, acts[k], round_, e)
                iterations += 1
                if e < e_max:
                    acts[k] = clients.call("step", k, grads)
                else:
                    model = clients.call("finish", k, grads)
                    if finished < q_c:
                        weights = server.call("on_client_model", k, model, prep.setup.client_size(k))
                        finished += 1
    server.call("evaluate")
    return time.perf_counter() - t0, iterations


def _is_run_process(pid: str) -> bool:
    """This process, or one of Ray's (raylet, GCS, workers, actors)."""
    return pid == str(os.getpid()) or is_ray_process(command_line(pid))


class PeakRSS:
    """Samples the summed RSS of this process plus Ray's processes every 0.5 s."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> int:
        total = 0
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if _is_run_process(pid):
                    total += rss_bytes(pid)
            except OSError:
                continue
        return total

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._sample())
            time.sleep(0.5)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def engine_run(sc, data_dir: str | None, out: Path) -> tuple[float, int, dict]:
    """raysfl on an embedded Ray; wall time from the first evaluation (actors up) to the last."""
    import pyarrow.parquet as pq

    # a scratch directory: a rerun replaces the last one
    summary = run(sc, out, backend="ray", data_dir=data_dir, overwrite=True)
    rows = pq.read_table(out / "metrics.parquet").to_pylist()
    events = pq.read_table(out / "events.parquet").to_pylist()
    n_act = sum(e["kind"] == "act" for e in events)
    return rows[-1]["wall_s"] - rows[0]["wall_s"], n_act, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("RAYSFL_DATA"))
    parser.add_argument("--iterations", type=int, default=1, help="global iterations per measurement")
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--out", default="/tmp/raysfl-bench")
    args = parser.parse_args()
    import ray

    secure_token_file()  # a missing ~/.ray/auth_token owner-only, as raysfl's own start makes it
    ray.init(include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    base = [
        "metrics.progress=false",
        "metrics.tensorboard=false",
        f"train.global_iterations={args.iterations}",
        f"train.eval_every={args.iterations}",
    ]
    print("| covariance | raysfl local it/s | ideal loop it/s | ratio raysfl / ideal | local iterations |")
    print("|---|---|---|---|---|")
    for cov in ("diagonal", "full"):
        sc = load_scenario(
            ROOT / "scenarios" / "default.toml", [*base, f'algorithm.params.covariance="{cov}"']
        )
        wall, n_act, _ = engine_run(sc, args.data_dir, Path(args.out) / f"gas-{cov}")
        ideal_wall, ideal_n = ideal_loop(sc, args.data_dir)
        print(
            f"| {cov} | {n_act / wall:.2f} | {ideal_n / ideal_wall:.2f} | "
            f"{(ideal_wall / ideal_n) / (wall / n_act):.2f} | {n_act} (ideal {ideal_n}) |",
            flush=True,
        )
    if args.skip_scale:
        return
    sc = load_scenario(
        ROOT / "scenarios" / "default.toml",
        [
            *base,
            "federation.num_clients=1000",
            "federation.active_clients=100",
            "train.local_iterations=5",
            "engine.pools=2",
        ],
    )
    with PeakRSS() as rss:
        wall, n_act, summary = engine_run(sc, args.data_dir, Path(args.out) / "gas-scale")
    print()
    print("| registered | concurrent | pools | local iterations | wall s | local it/s | peak total RSS |")
    print("|---|---|---|---|---|---|---|")
    print(f"| 1000 | 100 | 2 | {n_act} | {wall:.1f} | {n_act / wall:.2f} | {rss.peak / 2**30:.2f} GiB |")


if __name__ == "__main__":
    main()
