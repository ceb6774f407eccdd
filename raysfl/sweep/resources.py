"""What one sweep trial reserves: a placement group sized from its scenario, fitted to the cluster.

A trial is one ordinary raysfl run: a driver (the coordinator, in Tune's trial process), one ``Server``
actor and ``P`` ``ClientPool`` actors. Its placement group has ``2 + P`` bundles, in this order:

    bundle 0         the driver         {"CPU": DRIVER_CPU}  (the coordinator mostly waits on the actors)
    bundle 1         the server         {"CPU": engine.server_threads} (+ {"GPU": 1} on a GPU cluster)
    bundles 2..P+1   the client pools   {"CPU": engine.torch_threads} each

so the trial's actors run inside its own reservation (:func:`raysfl.engine.cluster.ray_dispatcher` puts
them into these bundles) and trials pack onto nodes without oversubscribing them. A trial that asks for
more CPUs than the whole cluster has (the default scenario on a 2-core laptop asks for 3.5) has every
bundle scaled down by one factor so that it fits the cluster exactly; then one trial runs at a time,
which is what such a machine can do. On a cluster the factor is lowered further until the bundles fit node
by node (a bundle larger than every node is never granted).

``raysfl sweep --trial-cpus N`` scales every trial's bundles to N CPUs in all instead. The actors keep
their thread counts (so every number a trial computes stays the same); only how many trials Ray starts at
once changes. It is for trials whose actors mostly wait: a GAS trial with one server thread keeps one core
busy and its pool's about 15 % of the other (measured on the Fashion-MNIST suite of
benchmarks/REPRODUCTION.md), so ``--trial-cpus 1`` on two cores runs two such trials at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from raysfl.engine.cluster import ClusterTooSmallError, fits_nodes, pool_count
from raysfl.scenario import Scenario

DRIVER_CPU = 0.5


@dataclass(frozen=True)
class TrialResources:
    """The bundles of one trial and whether they were scaled down to fit the cluster."""

    bundles: tuple[dict[str, float], ...]
    scale: float  # 1.0 unless the request was scaled (to fit the cluster, or to --trial-cpus)

    @property
    def cpus(self) -> float:
        """CPUs the whole trial reserves."""
        return sum(b.get("CPU", 0.0) for b in self.bundles)

    @property
    def gpus(self) -> float:
        """GPUs the whole trial reserves."""
        return sum(b.get("GPU", 0.0) for b in self.bundles)

    def describe(self) -> str:
        """``driver 0.5 CPU + server 2 CPU + 1×pool 1 CPU = 3.5 CPU`` (and the scale when shrunk)."""
        n_pools = len(self.bundles) - 2
        pool = self.bundles[2] if n_pools else {}
        server = self.bundles[1]
        gpu = f" {server['GPU']:g} GPU" if server.get("GPU") else ""
        text = (
            f"driver {self.bundles[0]['CPU']:.3g} CPU + server {server['CPU']:.3g} CPU{gpu} + "
            f"{n_pools}×pool {pool.get('CPU', 0):.3g} CPU = {self.cpus:.3g} CPU"
        )
        if self.scale != 1.0:
            text += f" (scaled ×{self.scale:.3g} from the actors' threads)"
        return text


def trial_resources(
    sc: Scenario,
    cluster: dict[str, Any],
    cpus: float | None = None,
    nodes: Sequence[tuple[float, float]] = (),
) -> TrialResources:
    """The placement-group bundles of a trial running ``sc`` on a cluster with ``cluster`` resources.

    ``cluster`` is what ``ray.cluster_resources()`` returns (``{"CPU": 2.0, ...}``). ``cpus`` (the
    ``--trial-cpus`` of ``raysfl sweep``) scales the bundles to that many CPUs in all, at most the
    cluster's; by default they are the actors' thread counts, scaled down only to fit the cluster.
    ``nodes`` (each node's CPUs and GPUs) scales them further until they fit node by node: a bundle larger
    than every node was never granted, and the sweep waited forever.

    Example:
        >>> from raysfl.scenario import scenario_from_dict
        >>> r = trial_resources(scenario_from_dict({"engine": {"pools": 2}}), {"CPU": 16.0})
        >>> [b["CPU"] for b in r.bundles], r.scale
        ([0.5, 2.0, 1.0, 1.0], 1.0)
    """
    eng = sc.engine
    n_pools = pool_count(sc.federation.num_clients, eng.pools, eng.clients_per_pool)
    server: dict[str, float] = {"CPU": float(eng.server_threads)}
    if eng.server_device != "cpu" and float(cluster.get("GPU", 0.0)) >= 1.0:
        server["GPU"] = 1.0
    bundles = [{"CPU": DRIVER_CPU}, server] + [{"CPU": float(eng.torch_threads)} for _ in range(n_pools)]
    total = sum(b["CPU"] for b in bundles)
    target = total if cpus is None else float(cpus)
    if target <= 0:
        raise ValueError(f"--trial-cpus: {cpus} must be > 0 (the CPUs one trial reserves)")
    available = float(cluster.get("CPU", 0.0))
    if available > 0:
        target = min(target, available)
    scale = 1.0
    if target != total:
        scale = target / total
    if nodes and not fits_nodes(_scaled(bundles, scale), nodes):
        fitting = _largest_fitting_scale(bundles, nodes, scale)
        if fitting is None and "GPU" in server and eng.server_device == "auto":
            del server["GPU"]  # no GPU node can hold the server's share: on a CPU, as "auto" allows
            fitting = _largest_fitting_scale(bundles, nodes, scale)
        if fitting is None:
            raise ClusterTooSmallError(
                f"a trial's actors ({', '.join(str(b) for b in bundles)}) fit no way onto the cluster's "
                f"nodes (CPUs, GPUs: {list(nodes)}); with engine.server_device = 'cuda' the server needs a "
                "GPU node with CPUs to spare"
            )
        scale = fitting
    if scale != 1.0:
        bundles = _scaled(bundles, scale)
    return TrialResources(tuple(bundles), scale)


def _scaled(bundles: list[dict[str, float]], scale: float) -> list[dict[str, float]]:
    """Every bundle's CPUs times ``scale``, rounded down a hair.

    Rounded down, float sums never exceed what is there (Ray compares with 1e-4 resolution).
    """
    if scale == 1.0:
        return bundles
    return [{**b, "CPU": max(1e-3, int(b["CPU"] * scale * 1e4) / 1e4)} for b in bundles]


def _largest_fitting_scale(
    bundles: list[dict[str, float]], nodes: Sequence[tuple[float, float]], below: float
) -> float | None:
    """The largest scale under ``below`` at which the bundles fit the nodes one by one (bisected).

    ``None`` when none does: the server's GPU on a node without CPUs to spare.
    """
    lo, hi = 0.0, below
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if fits_nodes(_scaled(bundles, mid), nodes) else (lo, mid)
    return lo if lo > 0.0 else None
