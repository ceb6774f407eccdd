"""Realtime mode: operations are throttled to the emulated devices, so wall time tracks emulated time."""

import pytest

from raysfl.engine.runner import run
from raysfl.scenario import scenario_from_dict

from .test_ray_determinism import TINY


@pytest.fixture(scope="module")
def virtual(tmp_path_factory) -> dict:
    """The summary of the run on the virtual clock (computed once for both backends)."""
    return run(scenario_from_dict(TINY), tmp_path_factory.mktemp("virtual"), backend="local")


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_realtime_run_is_paced_to_the_device_budget(ray_session, virtual, tmp_path, backend):
    # paced to about 2 wall seconds of device time; the local backend and one pool run concurrent clients'
    # calls in turn, so the run takes a few times that (realtime_lanes_note)
    scale = virtual["emulated_s"] / 2.0
    sc = scenario_from_dict(TINY, ['engine.clock="realtime"', f"engine.time_scale={scale}"])
    summary = run(sc, tmp_path / backend, backend=backend)
    assert summary["global_iterations"] == 2
    assert summary["final_accuracy"] is not None
    # paced: never faster than emulated time / scale (minus start-up of the clock)
    assert summary["wall_s"] >= 0.9 * summary["emulated_s"] / scale
    # the emulated duration can only grow when arrivals come late (taken as they come)
    assert summary["emulated_s"] >= virtual["emulated_s"] - 1e-9
    # each late arrival counts once, however often it was retried (it counted every 20 ms retry)
    assert summary["realtime_postponed_arrivals"] <= summary["events"]
    assert (summary["realtime_max_late_s"] > 0) == (summary["realtime_postponed_arrivals"] > 0)


def test_fewer_pools_than_concurrent_clients_in_realtime_is_said():
    from raysfl.engine.runner import realtime_lanes_note

    realtime = scenario_from_dict(TINY, ['engine.clock="realtime"', "engine.pools=1"])
    concurrent = realtime.federation.active_clients
    assert concurrent > 1
    note = realtime_lanes_note(realtime, "ray")
    assert note.startswith(f"realtime: 1 pool(s) for {concurrent} concurrent clients; a pool runs its calls")
    assert f"Use engine.pools >= {concurrent}" in note
    assert "the local backend runs every call in turn" in realtime_lanes_note(realtime, "local")
    enough = scenario_from_dict(TINY, ['engine.clock="realtime"', f"engine.pools={concurrent}"])
    assert realtime_lanes_note(enough, "ray") == ""
    assert realtime_lanes_note(scenario_from_dict(TINY), "ray") == ""  # the virtual clock: no matter
