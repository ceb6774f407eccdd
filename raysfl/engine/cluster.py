"""Start or join Ray and place the run's actors: client pools spread over nodes, the server on a GPU.

The one module (with ``ray_backend.py``) under ``raysfl/`` that imports Ray.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import ray

from raysfl.engine import ray_token, reaper
from raysfl.engine.interrupts import stop_on_sigterm
from raysfl.engine.ray_backend import RayDispatcher, remove_reservation

_EMBEDDED: dict[str, Any] = {}  # the local Ray that ensure_ray started: its process marker and watchdog


class ClusterUnreachableError(RuntimeError):
    """``--address`` / ``RAY_ADDRESS`` names no reachable Ray cluster."""


def check_reachable(address: str, timeout_s: float = 3.0) -> None:
    """Fail fast, with the fix, when ``host:port`` refuses connections (Ray itself retries for minutes).

    An address without a port is refused here: Ray raised a bare ``ValueError`` for it.
    """
    if address == "auto" or "://" in address:
        return
    if ":" not in address:
        raise ClusterUnreachableError(
            f"--address {address}: give the head node's host:port (`ray start --head` prints it; the port is "
            "6379 unless it was changed), or auto on a cluster node"
        )
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return
    except (OSError, ValueError) as err:
        raise ClusterUnreachableError(
            f"no Ray cluster at --address {address} ({err}). Start one with `ray start --head` (its output "
            "prints the address), pass --address auto on a cluster node, or drop --address and unset "
            "RAY_ADDRESS to run on an embedded local Ray."
        ) from None


def ensure_ray(address: str | None) -> None:
    """Join ``address`` (``"auto"`` or ``host:port``) or start an embedded local Ray; no-op if running.

    An explicit ``host:port`` is checked even when Ray is already running in this process, so a wrong
    address is never silently replaced by the current session. An embedded Ray ends with this process,
    however it exits (:func:`shutdown_ray`, :mod:`raysfl.engine.reaper`); ^C while it starts is held
    until it is up, then stops it and raises ``KeyboardInterrupt``.
    """
    if address:
        check_reachable(address)
    if ray.is_initialized():
        return
    kwargs: dict[str, Any] = {"logging_level": "WARNING", "log_to_driver": True}
    if not address:
        _start_embedded(kwargs)
        stop_on_sigterm()  # ray.init installed its own SIGTERM handler (exit 15, no summary)
        return
    shared_token = ray_token.joined_token_warning(address)
    if shared_token:
        print(f"raysfl: {shared_token}", file=sys.stderr, flush=True)
    try:
        ray.init(address=address, **kwargs)
        stop_on_sigterm()
    except (ConnectionError, ValueError) as err:  # ValueError: an address Ray cannot parse
        raise ClusterUnreachableError(
            f"could not join the Ray cluster at --address {address}: {str(err).rstrip('. ')}. If no cluster "
            "runs there, start one with `ray start --head`; if one does, check that this machine may join it "
            "(a cluster with token authentication needs RAY_AUTH_MODE=token here too); or drop --address and "
            "unset RAY_ADDRESS to run on an embedded local Ray."
        ) from None


@contextlib.contextmanager
def _sigint_deferred(note: str) -> Iterator[list[int]]:
    """Hold ^C back (in the main thread) while Ray starts or stops; yields the list of held signals.

    A ``ray.init`` cut short by ^C was seen to crash the interpreter at exit (SIGSEGV) and to leave
    processes behind: Ray gets to finish starting or stopping, then the caller acts on the ^C.
    """
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def hold(signum: int, frame: Any) -> None:
        if not held:
            print(f"raysfl: interrupted; {note}", file=sys.stderr, flush=True)
        held.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield held
    finally:
        signal.signal(signal.SIGINT, previous)


def _start_embedded(kwargs: dict[str, Any]) -> None:
    """``ray.init`` a local Ray whose every process dies with this one (:mod:`raysfl.engine.reaper`).

    A missing token file is created owner-only first, a shared one named (:mod:`raysfl.engine.ray_token`).
    """
    shared_token = ray_token.secure_token_file()  # before ray.init would write one with the umask's mode
    if shared_token:
        print(f"raysfl: {shared_token}", file=sys.stderr, flush=True)
    marker = f"{os.getpid()}-{secrets.token_hex(8)}"
    _EMBEDDED.update(marker=marker, watchdog=reaper.start_watchdog(marker))
    with _sigint_deferred("stopping Ray once it has started (a few seconds)") as held:
        os.environ[reaper.MARKER_VAR] = marker  # inherited by every process ray.init starts
        try:  # "local": a Ray of its own, never a cluster that happens to run on this machine
            ray.init(address="local", include_dashboard=False, **kwargs)
        except BaseException:
            shutdown_ray()
            raise
        finally:
            os.environ.pop(reaper.MARKER_VAR, None)
    if held:
        shutdown_ray()
        raise KeyboardInterrupt


def shutdown_ray() -> None:
    """Stop the local Ray that :func:`ensure_ray` started and end every process of it; else do nothing.

    A Ray this process joined (``--address``) or that someone else started (``ray.init`` by the caller)
    is left alone. ^C is held back while Ray stops.
    """
    if not _EMBEDDED:
        return
    marker, watchdog = _EMBEDDED.pop("marker"), _EMBEDDED.pop("watchdog")
    with _sigint_deferred("Ray is stopping"):
        if ray.is_initialized():
            ray.shutdown()
        reaper.kill_ray_processes(os.getpid(), marker)
        if watchdog is not None:
            watchdog.stdin.close()  # the watchdog finds nothing left and exits
            with contextlib.suppress(subprocess.TimeoutExpired):
                watchdog.wait(timeout=10)


def pool_count(num_clients: int, pools: int, clients_per_pool: int) -> int:
    """Pools to start: ``ceil(K / clients_per_pool)`` when that is set, else ``pools`` (at most K)."""
    if clients_per_pool > 0:
        return math.ceil(num_clients / clients_per_pool)
    return max(1, min(pools, num_clients))


def pool_of_client(num_clients: int, num_pools: int) -> Any:
    """The stable client → pool rule: contiguous blocks as even as can be, client ``k`` in pool ``k·P // K``.

    Block sizes differ by at most one, so every pool hosts clients (blocks of ``ceil(K / P)`` left the last
    pools empty: K = 20 on 8 pools used 7). Which pool hosts a client never changes a run's numbers.

    Example:
        >>> [pool_of_client(6, 4)(k) for k in range(6)]
        [0, 0, 1, 2, 2, 3]
    """
    if not 0 < num_pools <= num_clients:
        raise ValueError(f"pools: {num_pools} must be in 1..{num_clients} (the number of clients)")
    return lambda client: client * num_pools // num_clients


def cpu_share(node_cpus: list[float], actors: int) -> float:
    """The largest CPU share (at most 1) of which ``actors`` bundles fit on nodes with ``node_cpus`` CPUs.

    Shares of the cluster's total can fail to fit node by node: 5 actors of 0.8 CPU on two 2-CPU nodes
    (two per node). Which share an actor reserves never changes a run's numbers (its threads are fixed).

    Example:
        >>> cpu_share([2.0, 2.0], 5), cpu_share([2.0, 2.0], 3), cpu_share([4.0], 9)
        (0.6666666666666666, 1.0, 0.4444444444444444)
    """
    cpus = [c for c in node_cpus if c > 0] or [1.0]
    # The largest share that fits is a node's CPUs over a whole number of actors (or 1); the largest node
    # over all the actors always fits. A share that fits, any smaller one fits too: bisect the candidates
    # (10,000 actors, one per client, took 19 s when each was tried in turn).
    candidates = sorted({1.0, *(c / m for c in cpus for m in range(1, actors + 1) if c / m <= 1.0)})
    lo, hi = 0, len(candidates) - 1  # candidates[lo] fits (the smallest: the largest node over all actors)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits_nodes([{"CPU": candidates[mid]}] * actors, [(c, 0.0) for c in cpus]):
            lo = mid
        else:
            hi = mid - 1
    return candidates[lo]


def actor_options(n_pools: int, server_device: str) -> tuple[dict[str, Any], list[dict[str, Any]], Any]:
    """Ray options of the server and of each pool, and the placement group this run reserved (or None).

    Inside a placement group (a sweep trial, :mod:`raysfl.sweep.resources`: bundle 0 the driver, 1 the
    server, 2.. the pools) each actor goes into its own bundle and asks for exactly that bundle's
    resources. Otherwise the run reserves a placement group of its own, one bundle per actor, all at once
    (:func:`reserve`): the actors share the cluster's CPUs (at most one each, a share that fits node by
    node), pools are spread over the nodes, and the server takes a GPU when the cluster has one and
    ``server_device`` allows it. A server that must have a GPU and would get none is refused first
    (:func:`check_server_gpu`).
    """
    from ray.util.placement_group import get_current_placement_group

    pg = get_current_placement_group()
    if pg is not None:
        bundles = pg.bundle_specs
        if len(bundles) != n_pools + 2:
            raise RuntimeError(
                f"the trial's placement group has {len(bundles)} bundles; this run needs {n_pools + 2} "
                "(driver, server, one per pool)"
            )
        server = _in_bundle(pg, 1)
        check_server_gpu(server_device, server)
        return server, [_in_bundle(pg, 2 + i) for i in range(n_pools)], None
    while True:  # shares of the nodes alive now; shared again should the cluster shrink while waiting
        nodes = alive_nodes()
        # a GPU for the server when a node alive has one (its node may have been lost: ask again)
        use_gpu = server_device != "cpu" and any(gpu >= 1 for _, gpu in nodes)
        check_server_gpu(server_device, {"num_gpus": 1.0 if use_gpu else 0.0})
        bundles = share_bundles(n_pools, use_gpu, nodes)
        try:
            own = reserve(bundles)
        except _ClusterShrankError:
            if sorted(alive_nodes()) == sorted(nodes):  # not shrunk: these nodes can never hold them
                raise ClusterTooSmallError(
                    f"the cluster's nodes (CPUs, GPUs: {nodes}) cannot hold this run's actors "
                    f"({_describe(bundles)}) node by node; add a node, or lower engine.pools"
                ) from None
            continue
        return _in_bundle(own, n_pools), [_in_bundle(own, i) for i in range(n_pools)], own


class _ClusterShrankError(Exception):
    """A reservation no longer fits the nodes alive (a node was lost while it waited)."""


class ClusterTooSmallError(RuntimeError):
    """The cluster's nodes cannot hold a run's actors, however long it waits (a user error: exit 2)."""


def alive_nodes() -> list[tuple[float, float]]:
    """(CPUs, GPUs) of every node the cluster holds alive."""
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    return [(float(r.get("CPU", 0.0)), float(r.get("GPU", 0.0))) for r in nodes]


def share_bundles(n_pools: int, use_gpu: bool, nodes: list[tuple[float, float]]) -> list[dict[str, float]]:
    """One bundle per pool, then the server's (with a GPU when ``use_gpu``), that fit ``nodes`` together.

    Each a :func:`cpu_share` of the nodes' CPUs. The server's GPU ties it to a GPU node, which may hold fewer
    CPUs than that share (a head started with ``--num-cpus=0``): the server then takes what its GPU node
    has, and the pools' share is halved until all of them fit.
    """
    cpu = cpu_share([c for c, _ in nodes], n_pools + 1)
    server_cpu = cpu
    if use_gpu:
        server_cpu = min(cpu, max((c for c, g in nodes if g >= 1), default=0.0))

    def bundles(pool_cpu: float) -> list[dict[str, float]]:
        server = {"CPU": server_cpu} if server_cpu > 0 else {}
        # The pools' bundles first: with the server's first, Ray's SPREAD put both pools of a two-node
        # test on one node (tests/integration/test_multinode.py); in this order they land on distinct nodes.
        return [*({"CPU": pool_cpu} for _ in range(n_pools)), {**server, **({"GPU": 1.0} if use_gpu else {})}]

    while not fits_nodes(bundles(cpu), nodes) and cpu > 1e-3:
        cpu /= 2
    return bundles(cpu)


def _in_bundle(pg: Any, i: int) -> dict[str, Any]:
    """Actor options that put an actor in bundle ``i`` of ``pg``, asking for exactly its resources."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    spec = pg.bundle_specs[i]
    return {
        "num_cpus": spec.get("CPU", 0.0),
        "num_gpus": spec.get("GPU", 0.0),
        "scheduling_strategy": PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i),
    }


RESERVE_NOTE_S = 10.0  # how long a reservation waits before it says what it waits for (then every minute)


def reserve(bundles: list[dict[str, float]], note_after_s: float = RESERVE_NOTE_S) -> Any:
    """Reserve one bundle per actor at once (a placement group, spread over the nodes) and wait for it.

    All or nothing: two drivers on one cluster can no longer each hold part of what they need and wait
    for the other forever. While the cluster is busy, the wait says what it waits for after
    ``note_after_s`` and then every minute; ^C ends it. Bundles that no longer fit the nodes alive (one was
    lost) end the wait with :class:`_ClusterShrankError`, so the caller shares the remaining nodes again.
    """
    from ray.util.placement_group import placement_group

    pg = placement_group(bundles, strategy="SPREAD")
    ready, waited, note_at = pg.ready(), 0.0, note_after_s
    try:
        while not ray.wait([ready], timeout=1.0)[0]:
            waited += 1.0
            if not fits_nodes(bundles, alive_nodes()):
                raise _ClusterShrankError
            if waited >= note_at:
                note_at += 60.0
                free = {
                    k: round(float(v), 2) for k, v in ray.available_resources().items() if k in ("CPU", "GPU")
                }
                print(
                    f"raysfl: waiting {waited:.0f} s for the cluster to reserve this run's actors "
                    f"({_describe(bundles)}); free now: {free or 'nothing'}. Other runs may hold the CPUs, "
                    "or a lost node is not yet noticed; ^C stops waiting.",
                    file=sys.stderr,
                    flush=True,
                )
    except BaseException:
        remove_reservation(pg)
        raise
    return pg


def fits_nodes(bundles: Sequence[dict[str, float]], nodes: Sequence[tuple[float, float]]) -> bool:
    """Whether the bundles fit the nodes' (CPUs, GPUs), bundle by bundle: first fit, largest first.

    GPU bundles are placed first. A reservation that no longer fits the nodes alive can never be granted.
    """
    free = [list(n) for n in sorted(nodes, reverse=True)]
    wanted = sorted(((b.get("GPU", 0.0), b.get("CPU", 0.0)) for b in bundles), reverse=True)
    for gpu, cpu in wanted:
        at = next((i for i, (c, g) in enumerate(free) if c + 1e-9 >= cpu and g + 1e-9 >= gpu), None)
        if at is None:
            return False
        free[at][0] -= cpu
        free[at][1] -= gpu
    return True


def _describe(bundles: list[dict[str, float]]) -> str:
    """``1 × CPU 0.67, GPU 1; 4 × CPU 0.67``: what a reservation asks for."""
    counts: dict[str, int] = {}
    for b in bundles:
        key = ", ".join(f"{k} {v:g}" for k, v in sorted(b.items()))
        counts[key] = counts.get(key, 0) + 1
    return "; ".join(f"{n} × {key}" for key, n in counts.items())


def check_server_gpu(server_device: str, server_options: dict[str, Any]) -> None:
    """Refuse ``engine.server_device = "cuda"`` when the server actor would get no GPU.

    Checked on the driver: in the actor, the failure would be a constructor error that Ray reports as a dead
    actor, restarted and retried until the run gives up without saying why.

    Raises:
        ServerDeviceError: the cluster (or the sweep trial's bundle) offers the server no GPU.
    """
    from raysfl.engine.hosts import ServerDeviceError

    if server_device == "cuda" and float(server_options.get("num_gpus", 0) or 0) < 1:
        where = (
            "the sweep trial's server bundle" if "scheduling_strategy" in server_options else "the cluster"
        )
        raise ServerDeviceError(
            [
                f"engine.server_device: 'cuda' needs a GPU, but {where} has none for the server; choose "
                "'auto' (the GPU where there is one, else the CPU) or 'cpu'"
            ]
        )


def ray_dispatcher(prep: Any, address: str | None, server_device: str | None = None) -> RayDispatcher:
    """Start Ray if needed, put the data in the object store once, create the pools and the server.

    ``server_device`` replaces ``engine.server_device`` (a restart keeps the device the server had).
    """
    from raysfl.actors.client_pool import ClientPool
    from raysfl.actors.server import Server

    ensure_ray(address)
    sc = prep.scenario
    eng = sc.engine
    k = sc.federation.num_clients
    n_pools = pool_count(k, eng.pools, eng.clients_per_pool)
    device = server_device or eng.server_device
    server_opts, pool_opts, reserved = actor_options(n_pools, device)
    try:
        ds = prep.dataset
        train_x, train_y = ray.put(ds.train_x), ray.put(ds.train_y)
        test_x, test_y = ray.put(ds.test_x), ray.put(ds.test_y)
        server = Server.options(**server_opts).remote(
            prep.setup, test_x, test_y, prep.transform, device, eng.server_threads
        )
        pools = [
            ClientPool.options(**opts).remote(prep.setup, train_x, train_y, prep.transform, eng.torch_threads)
            for opts in pool_opts
        ]
        scale = eng.time_scale if eng.clock == "realtime" else None
        return RayDispatcher(
            pools, pool_of_client(k, n_pools), server, eng.max_inflight, scale, eng.placement, reserved
        )
    except BaseException:
        if reserved is not None:
            remove_reservation(reserved)  # kills what was started in it
        raise
