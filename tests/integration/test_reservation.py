"""A run reserves its actors all at once (a placement group), says what it waits for, and gives it back.

Reserving actor by actor let two drivers on one cluster each hold part of what they needed and wait for
the other forever, silently; and shares of the cluster's total CPUs could fit in total but not node by
node (a cluster audit found both).
"""

import contextlib
import threading
import time

import pytest

from raysfl.engine.cluster import cpu_share, fits_nodes, reserve, share_bundles
from raysfl.engine.runner import run
from raysfl.scenario import scenario_from_dict

from .test_roaming_clients import FEDAVG


@pytest.mark.parametrize(
    "nodes, actors, share",
    [
        ([2.0, 2.0], 3, 1.0),
        ([2.0, 2.0], 5, 2 / 3),  # the old share of the total, 4/5, fit only 2 per node: 4 < 5
        ([2.0, 2.0], 9, 0.4),
        ([4.0], 9, 4 / 9),
        ([1.0, 8.0], 2, 1.0),
        ([2.0, 3.0], 10_000, 5 / 10_000),  # one pool per client of 10,000 (bisected: trying each took 19 s)
    ],
)
def test_the_cpu_share_fits_node_by_node(nodes, actors, share):
    got = cpu_share(nodes, actors)
    assert got == pytest.approx(share)
    assert sum(int(c / got + 1e-9) for c in nodes) >= actors  # every actor's bundle fits on some node


def test_a_gpu_bundle_fits_only_where_a_gpu_is_left():
    """A reservation waiting for a lost node's GPU was never found not to fit (CPUs alone were compared):
    the restart waited forever."""
    server, pool = {"CPU": 1.0, "GPU": 1.0}, {"CPU": 1.0}
    assert fits_nodes([server, pool], [(2.0, 0.0), (1.0, 1.0)])
    assert not fits_nodes([server, pool], [(2.0, 0.0)])  # the GPU node is gone
    assert not fits_nodes([server, server], [(4.0, 1.0)])  # one GPU, two asked for
    assert fits_nodes([pool] * 4, [(2.0, 0.0), (2.0, 0.0)]) and not fits_nodes([pool] * 5, [(2.0, 0.0)] * 2)


@pytest.mark.parametrize(
    "nodes, pools",
    [
        ([(0.0, 1.0), (8.0, 0.0)], 3),  # a GPU head started with --num-cpus=0
        ([(0.5, 1.0), (2.0, 0.0)], 2),
        ([(2.0, 1.0), (2.0, 0.0)], 3),
        ([(1.0, 0.0), (1.0, 0.0), (1.0, 0.0)], 2),
    ],
)
def test_the_shares_fit_the_nodes_with_the_servers_gpu(nodes, pools):
    """The server's GPU ties it to a GPU node that may hold fewer CPUs than the share: the bundles never
    fit, and the reservation was retried every second without a word."""
    use_gpu = any(g >= 1 for _, g in nodes)
    bundles = share_bundles(pools, use_gpu, nodes)
    assert fits_nodes(bundles, nodes) and len(bundles) == pools + 1
    assert bundles[-1].get("GPU", 0.0) == (1.0 if use_gpu else 0.0)
    gpu_node_cpus = max((c for c, g in nodes if g >= 1), default=None)
    if gpu_node_cpus is not None:
        assert bundles[-1].get("CPU", 0.0) <= gpu_node_cpus


def test_a_run_gives_its_reservation_back(ray_session, tmp_path):
    from ray.util import placement_group_table

    before = set(placement_group_table())
    run(scenario_from_dict(FEDAVG, ["engine.pools=2"]), tmp_path / "out", backend="ray")
    new = {pg: info for pg, info in placement_group_table().items() if pg not in before}
    assert len(new) == 1  # one group for the server and both pools
    (info,) = new.values()
    assert info["state"] == "REMOVED" and len(info["bundles"]) == 3


def test_a_reservation_waits_for_busy_cpus_and_says_what_it_waits_for(ray_session, capsys):
    from ray.util.placement_group import placement_group, remove_placement_group

    total = ray_session.cluster_resources()["CPU"]
    other = placement_group([{"CPU": total}])  # another driver holding every CPU
    got: list = []
    try:
        ray_session.get(other.ready(), timeout=60)  # once earlier tests' actors have let go
        waiting = threading.Thread(
            target=lambda: got.append(reserve([{"CPU": 1.0}], note_after_s=1.0)), daemon=True
        )
        waiting.start()
        time.sleep(3.0)
        assert waiting.is_alive() and not got  # it waits: it holds nothing and takes nothing
        remove_placement_group(other)  # the other run ends
        waiting.join(timeout=30)
        assert got, "the reservation did not follow once the CPUs were free"
    finally:  # never leave the session's CPUs held: every later run would wait for them
        for pg in [other, *got]:
            with contextlib.suppress(Exception):
                remove_placement_group(pg)
    err = capsys.readouterr().err
    assert "raysfl: waiting" in err and "s for the cluster to reserve this run's actors (1 × CPU 1)" in err
    assert "free now: " in err and "not yet noticed; ^C stops waiting" in err
