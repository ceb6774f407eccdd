"""Determinism on a local multi-node cluster (two raylets on this machine, ray.cluster_utils.Cluster)."""

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raysfl.engine.runner import run
from raysfl.scenario import scenario_from_dict

from .test_ray_determinism import TINY, _metrics
from .test_roaming_clients import FEDAVG, same_run

pytestmark = pytest.mark.multinode


@contextlib.contextmanager
def two_raylets(head: dict, second: dict) -> Iterator:
    """A head raylet (``head``: its node arguments) and a second one (``second``), with this process
    connected to them; yields the second node. Replaces the test session's own Ray while it lasts."""
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args=head)
    node = cluster.add_node(**second)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
    try:
        yield node
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture(scope="class")
def two_node_cluster():
    """Two raylets of 2 CPUs, shared by the tests of one class (a cluster takes seconds to start)."""
    with two_raylets({"num_cpus": 2}, {"num_cpus": 2}):
        yield


class TestTwoRaylets:
    """Both tests run on one two-node cluster: neither changes it."""

    def test_two_raylets_give_the_single_process_result(self, two_node_cluster, tmp_path):
        local = tmp_path / "local"
        run(scenario_from_dict(TINY), local, backend="local")
        out = tmp_path / "cluster"
        summary = run(scenario_from_dict(TINY, ["engine.pools=2"]), out, backend="ray")
        nodes = summary["placement"]["pool_nodes"]
        assert len(set(nodes)) == 2, f"pools were not spread over the two nodes: {nodes}"
        assert _metrics(out) == _metrics(local)
        assert (
            pq.read_table(out / "events.parquet").to_pylist()
            == pq.read_table(local / "events.parquet").to_pylist()
        )

    def test_roaming_clients_cross_nodes_with_the_single_process_result(self, two_node_cluster, tmp_path):
        """FedAvg's jobs go to the least-loaded pool, each pool on its own raylet: the client states cross
        nodes through the object store."""
        local, out = tmp_path / "local", tmp_path / "cluster"
        run(scenario_from_dict(FEDAVG), local, backend="local")
        summary = run(
            scenario_from_dict(FEDAVG, ["engine.pools=2", "engine.max_inflight=2"]), out, backend="ray"
        )
        placed = summary["placement"]
        assert len(set(placed["pool_nodes"])) == 2, f"pools were not spread over the two nodes: {placed}"
        assert placed["pool_placement"] == "least-loaded" and placed["client_moves"] > 0
        same_run(out, local)


@pytest.fixture
def two_roomy_nodes():
    """Two raylets of 3 CPUs: room for one 2.5-CPU sweep trial on each."""
    with two_raylets({"num_cpus": 3}, {"num_cpus": 3}):
        yield


def test_two_concurrent_sweep_trials_land_on_different_nodes(two_roomy_nodes, tmp_path):
    """Each trial's placement group (driver 0.5 + server 1 + pool 1 CPU) packs onto one node."""
    import json

    from raysfl.config import dumps_toml
    from raysfl.sweep.execute import run_sweep
    from raysfl.sweep.spec import load_sweep

    (tmp_path / "tiny.toml").write_text(dumps_toml(TINY))
    sweep = tmp_path / "two.sweep.toml"
    sweep.write_text('base = "tiny.toml"\n[set]\n"engine.server_threads" = 1\n[grid]\nseed = [1, 2]\n')
    result = run_sweep(load_sweep(sweep), tmp_path / "out", max_concurrent=2, verbose=0)
    assert result.finished == ["seed1", "seed2"]
    nodes = []
    for trial in result.finished:
        placement = json.loads((tmp_path / "out" / trial / "summary.json").read_text())["placement"]
        used = {placement["node_id"], *placement["pool_nodes"]}
        assert len(used) == 1, f"trial {trial} was split over nodes: {placement}"
        nodes.append(used.pop())
    assert nodes[0] != nodes[1], "both trials were packed onto one node"
    # the two trials ran at the same time (each reports its start in Tune's result files)
    spans = []
    for trial in result.finished:
        lines = (tmp_path / "out" / "_tune" / trial / "result.json").read_text().splitlines()
        stamps = [json.loads(line)["timestamp"] for line in lines]
        first = json.loads(lines[0])
        spans.append((stamps[0] - first["time_this_iter_s"], stamps[-1]))
    assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1], f"trials did not overlap: {spans}"


@pytest.fixture
def gpu_on_another_node():
    """The driver's raylet (2 CPUs, no GPU) and a second raylet that declares one GPU and 1 CPU.

    On a machine without CUDA the GPU is only a Ray resource: the server is placed for it, and its
    ``server_device = "auto"`` then finds no CUDA and stays on the CPU. With CUDA, Ray hands the actor the
    real GPU.
    """
    with two_raylets({"num_cpus": 2, "num_gpus": 0}, {"num_cpus": 1, "num_gpus": 1}) as gpu_node:
        yield gpu_node.node_id


def test_the_server_goes_to_the_gpu_node_and_the_pools_stay_off_it(gpu_on_another_node, tmp_path):
    import ray
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    local = tmp_path / "local"
    run(scenario_from_dict(TINY, [f"engine.server_device={device}"]), local, backend="local")
    out = tmp_path / "cluster"
    summary = run(scenario_from_dict(TINY, ["engine.pools=2"]), out, backend="ray")
    placement = summary["placement"]
    driver_node = ray.get_runtime_context().get_node_id()
    assert driver_node != gpu_on_another_node
    assert placement["node_id"] == gpu_on_another_node, placement  # it asked for the GPU (num_gpus = 1)
    assert placement["device"] == device
    assert set(placement["pool_nodes"]) == {driver_node}, placement  # the GPU node's one CPU is the server's
    assert _metrics(out) == _metrics(local)
    assert (
        pq.read_table(out / "events.parquet").to_pylist()
        == pq.read_table(local / "events.parquet").to_pylist()
    )


def _kill_node(node) -> None:
    """SIGKILL a raylet and every process it started (its workers), as a machine that is lost."""
    import psutil

    raylet = psutil.Process(node.all_processes["raylet"][0].process.pid)
    for proc in [*raylet.children(recursive=True), raylet]:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()


LONG = ["train.global_iterations=8", "train.local_iterations=6", "engine.checkpoint_every=1"]


@pytest.fixture(scope="module")
def undisturbed_long_run(tmp_path_factory) -> Path:
    """The in-process run that both node losses must end equal to (computed once)."""
    out = tmp_path_factory.mktemp("undisturbed")
    run(scenario_from_dict(TINY, LONG), out, backend="local")
    return out


@pytest.mark.parametrize("lost", ["a pool's node", "the server's GPU node"])
def test_a_run_that_loses_a_node_restarts_on_the_others_and_ends_as_if_undisturbed(
    undisturbed_long_run, tmp_path, lost
):
    """The lost node's pool dies mid-run; the restart reserves its actors on the remaining node (a fresh
    actor on the dying node used to end the run with Ray's ActorDiedError, restarts unused).

    With a GPU on the lost node (a Ray resource only: torch sees none, so the server computes on the CPU)
    the server went there; the restart asked for that GPU again and waited for it forever."""
    import threading
    import time

    # The cluster notices a lost node only by missed health checks: Ray's defaults (every 3 s, 5 misses,
    # after 5 s) take 20 s or more; every 1 s, 3 misses, after 1 s take a few (the same events, sooner).
    checks = {"health_check_initial_delay_ms": 1000, "health_check_period_ms": 1000}
    checks |= {"health_check_timeout_ms": 2000, "health_check_failure_threshold": 3}
    second = {"num_cpus": 2, "num_gpus": 1 if "GPU" in lost else 0}
    with two_raylets({"num_cpus": 2, "_system_config": checks}, second) as worker:
        out = tmp_path / "cluster"
        done: list = []
        sc = scenario_from_dict(TINY, [*LONG, "engine.pools=2", "engine.max_restarts=3"])
        thread = threading.Thread(target=lambda: done.append(run(sc, out, backend="ray")), daemon=True)
        thread.start()
        deadline = time.monotonic() + 120
        while not list((out / "checkpoints").glob("ckpt-*.pt")):
            assert thread.is_alive() and time.monotonic() < deadline, "no checkpoint before the node loss"
            time.sleep(0.1)
        _kill_node(worker)  # as a machine lost: the cluster notices only by missed health checks
        thread.join(timeout=300)
        assert done, "the run did not finish after the node loss"
        assert done[0]["restarts"] >= 1
        placed = done[0]["placement"]
        assert len(set(placed["pool_nodes"])) == 1  # the restarted pools share the head node
        assert placed["node_id"] == placed["pool_nodes"][0] and placed["device"] == "cpu"  # the server too
        assert _metrics(out) == _metrics(undisturbed_long_run)


def test_a_run_without_an_address_starts_its_own_ray_beside_a_running_cluster(tmp_path):
    """A cluster on this machine records its address where a bare ray.init() looks (a test Cluster does,
    as `ray start` does): a run given no --address joined it instead of starting its own Ray, as the
    README promises, and failed there (its actors were cancelled)."""
    import json
    import os
    import subprocess
    import sys

    import ray
    from ray._private.utils import get_ray_address_file
    from ray.cluster_utils import Cluster

    from raysfl.config import dumps_toml

    if ray.is_initialized():
        ray.shutdown()
    recorded = Path(get_ray_address_file(None))
    before = recorded.read_text() if recorded.exists() else None
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        assert recorded.read_text().strip() == cluster.head_node.gcs_address
        scenario = tmp_path / "tiny.toml"
        scenario.write_text(dumps_toml(TINY))
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        proc = subprocess.run(
            [sys.executable, "-m", "raysfl.cli", "run", str(scenario), "--out", str(tmp_path / "out")],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        assert summary["placement"]["node_id"] != cluster.head_node.node_id  # the server's node
    finally:
        cluster.shutdown()
        if before is None:
            recorded.unlink(missing_ok=True)
        else:
            recorded.write_text(before)
