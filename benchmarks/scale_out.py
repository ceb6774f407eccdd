"""Scale-out sweeps: registered/concurrent clients, pools, and nodes of a local multi-raylet cluster.

Three sweeps of GAS runs on an embedded Ray (or a ``ray.cluster_utils.Cluster`` for the node sweep):

    clients  registered K = 100 → 10,000 with concurrency C = K/10 (10 → 1,000 stragglers), 2 pools
    pools    pools 1 → N at a fixed K and C
    nodes    raylets 1 → N on this machine, one pool per node

Each row prints client local iterations per wall second (GAS "act" events), server updates per wall
second (events that updated the server model), emulated seconds per wall second, the peak resident
memory of the driver, of the largest client pool, of the server and of Ray's own processes (raylet,
GCS, ...) — each the maximum of samples taken every 0.5 s — and the peak object-store (plasma) use.
Wall time runs from the first evaluation (actors up, initial model evaluated) to the last.

Usage (prints markdown tables; RESULTS.md records the machine and the command):
    python benchmarks/scale_out.py [--data-dir DIR] [--sweep clients pools nodes] [--model lenet5]
        [--max-clients 10000] [--max-pools 4] [--max-nodes 3] [--out /tmp/raysfl-scale]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
from procstats import command_line, is_ray_process, rss_bytes

from raysfl.engine.ray_token import secure_token_file
from raysfl.engine.runner import run
from raysfl.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
ROLES = (("pool", "ClientPool"), ("server", "Server"), ("ray", "raylet"), ("ray", "gcs_server"))


def _role(pid: str) -> str | None:
    """driver (this process), pool, server, ray (raylet/GCS/idle workers) or None (not part of the run)."""
    if pid == str(os.getpid()):
        return "driver"
    cmd = command_line(pid)
    for role, token in ROLES:
        if token in cmd:
            return role
    return "ray" if is_ray_process(cmd) else None


@dataclass
class Sampler:
    """Peak RSS per role (the largest single process for pools; the sum for Ray's own) and plasma use."""

    every_s: float = 0.5
    peak: dict[str, int] = field(default_factory=dict)
    plasma_peak: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> None:
        now: dict[str, int] = {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                role = _role(pid)
                if role is None:
                    continue
                rss = rss_bytes(pid)
            except OSError:
                continue
            now[role] = now.get(role, 0) + rss if role == "ray" else max(now.get(role, 0), rss)
        for role, value in now.items():
            self.peak[role] = max(self.peak.get(role, 0), value)

    def _plasma(self) -> None:
        from ray._private.internal_api import memory_summary

        text = memory_summary(stats_only=True)
        match = re.search(r"Plasma memory usage (\d+) MiB", text)
        if match:
            self.plasma_peak = max(self.plasma_peak, int(match.group(1)) * 2**20)

    def _loop(self) -> None:
        tick = 0
        while not self._stop.is_set():
            self._sample()
            if tick % 4 == 0:
                with contextlib.suppress(Exception):  # best effort while actors come and go
                    self._plasma()
            tick += 1
            time.sleep(self.every_s)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def measure(label: str, overrides: list[str], args: argparse.Namespace, address: str | None = None) -> str:
    """Run one point and format its table row."""
    base = [
        f'model.name="{args.model}"',
        f'model.split="{args.split}"',
        'data.partition="iid"',
        "train.batch_size=5",
        f"train.local_iterations={args.local_iterations}",
        f"train.global_iterations={args.iterations}",
        f"train.eval_every={args.iterations}",
        "train.lr=0.01",
        'algorithm.params.covariance="diagonal"',
        "metrics.progress=false",
        "metrics.tensorboard=false",
    ]
    sc = load_scenario(ROOT / "scenarios" / "default.toml", [*base, *overrides])
    out = Path(args.out) / label.replace(" ", "_").replace("/", "-")
    with Sampler() as sampler:
        # a scratch directory: a rerun replaces the last one
        summary = run(sc, out, backend="ray", data_dir=args.data_dir, address=address, overwrite=True)
    metrics = pq.read_table(out / "metrics.parquet").to_pylist()
    events = pq.read_table(out / "events.parquet", columns=["kind", "server_update"]).to_pylist()
    wall = metrics[-1]["wall_s"] - metrics[0]["wall_s"]
    acts = sum(e["kind"] == "act" for e in events)
    updates = sum(bool(e["server_update"]) for e in events)
    emulated = metrics[-1]["t"] - metrics[0]["t"]
    gib = {role: sampler.peak.get(role, 0) / 2**30 for role in ("driver", "pool", "server", "ray")}
    fed = sc.federation
    return (
        f"| {label} | {fed.num_clients} | {fed.active_clients} | {len(summary['placement']['pool_nodes'])} "
        f"| {acts} | {wall:.1f} | {acts / wall:.2f} | {updates / wall:.2f} | {emulated / wall:.1f} "
        f"| {gib['driver']:.2f} | {gib['pool']:.2f} | {gib['server']:.2f} | {gib['ray']:.2f} "
        f"| {sampler.plasma_peak / 2**20:.0f} |"
    )


HEADER = (
    "| point | registered K | concurrent C | pools | local its | wall s | local it/s | server upd/s "
    "| emulated s / wall s | driver GiB | largest pool GiB | server GiB | Ray system GiB "
    "| plasma peak MiB |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def sweep_clients(args: argparse.Namespace) -> None:
    import ray

    secure_token_file()  # a missing ~/.ray/auth_token owner-only, as raysfl's own start makes it
    ray.init(include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    print(HEADER, flush=True)
    k = args.min_clients
    while k <= args.max_clients:
        c = max(10, k // 10)
        q = max(1, c // 10)
        print(
            measure(
                f"K={k} C={c}",
                [
                    f"federation.num_clients={k}",
                    f"federation.active_clients={c}",
                    f"algorithm.params.q_s={q}",
                    f"algorithm.params.q_c={q}",
                    "engine.pools=2",
                ],
                args,
            ),
            flush=True,
        )
        k *= 10
    ray.shutdown()


def _fixed_point(pools: int) -> list[str]:
    return [
        "federation.num_clients=1000",
        "federation.active_clients=100",
        "algorithm.params.q_s=10",
        "algorithm.params.q_c=10",
        f"engine.pools={pools}",
    ]


def sweep_pools(args: argparse.Namespace) -> None:
    import ray

    secure_token_file()  # a missing ~/.ray/auth_token owner-only, as raysfl's own start makes it
    ray.init(include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    print(HEADER, flush=True)
    for pools in range(1, args.max_pools + 1):
        print(measure(f"pools={pools}", _fixed_point(pools), args), flush=True)
    ray.shutdown()


def sweep_nodes(args: argparse.Namespace) -> None:
    import ray
    from ray.cluster_utils import Cluster

    print(HEADER, flush=True)
    cpus = max(1, (os.cpu_count() or 2))
    for nodes in range(1, args.max_nodes + 1):
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": cpus})
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=cpus)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
        try:
            print(measure(f"nodes={nodes}", _fixed_point(nodes), args), flush=True)
        finally:
            ray.shutdown()
            cluster.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("RAYSFL_DATA"))
    parser.add_argument("--sweep", nargs="+", default=["clients", "pools", "nodes"])
    parser.add_argument("--model", default="lenet5", help="split model (default: LeNet-5, engine-bound)")
    parser.add_argument("--split", default="conv1", help="cut layer of --model")
    parser.add_argument("--min-clients", type=int, default=100)
    parser.add_argument("--max-clients", type=int, default=10_000)
    parser.add_argument("--max-pools", type=int, default=4)
    parser.add_argument("--max-nodes", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=3, help="global iterations per point")
    parser.add_argument("--local-iterations", type=int, default=5, help="E")
    parser.add_argument("--out", default="/tmp/raysfl-scale")
    args = parser.parse_args()
    args.out = str(Path(args.out) / time.strftime("%Y%m%d-%H%M%S"))
    print(f"model {args.model}, Fashion-MNIST iid, B = 5, E = {args.local_iterations}, "
          f"T = {args.iterations} global iterations, GAS diagonal covariance\n")  # fmt: skip
    for name in args.sweep:
        print(f"\n### sweep: {name}\n")
        {"clients": sweep_clients, "pools": sweep_pools, "nodes": sweep_nodes}[name](args)


if __name__ == "__main__":
    main()
