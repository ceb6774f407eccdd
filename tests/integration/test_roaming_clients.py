"""Roaming clients on Ray (engine.placement = "least-loaded", the default): FedAvg's jobs run in whichever
pool has the fewest calls in flight, each carrying its client's state, and every number stays the one of
the in-process run (DESIGN property 3), through a killed pool and a resumed checkpoint too."""

import pytest

from raysfl.engine.runner import run
from raysfl.scenario import scenario_from_dict
from tests.unit.engine.test_checkpoint_resume import crash_after, rows

FEDAVG = {
    "name": "tiny-fedavg-roaming",
    "seed": 21,
    "data": {"dataset": "synthetic", "partition": "shard", "synthetic_train": 480, "synthetic_test": 100},
    "model": {"name": "lenet5"},
    "federation": {"num_clients": 5, "active_clients": 2},
    # 96 samples a client, 3 steps of 16 a job: every other job starts mid-epoch
    "train": {"global_iterations": 6, "local_iterations": 3, "batch_size": 16},
    "algorithm": {"name": "fedavg"},
    "metrics": {"progress": False, "tensorboard": False},
}
JOBS = 6 * 2


def same_run(a, b):
    """The two runs' metrics and event logs are equal (wall-clock columns aside)."""
    for name in ("metrics.parquet", "events.parquet"):
        assert rows(a / name) == rows(b / name), name


def test_roaming_clients_compute_the_numbers_of_fixed_blocks_and_of_one_process(ray_session, tmp_path):
    run(scenario_from_dict(FEDAVG), tmp_path / "local", backend="local")
    # at most 2 calls in flight: the coordinator cannot run ahead, so idle pools take the next jobs
    roaming = run(
        scenario_from_dict(FEDAVG, ["engine.pools=2", "engine.max_inflight=2"]),
        tmp_path / "ray",
        backend="ray",
    )
    blocks = run(
        scenario_from_dict(FEDAVG, ["engine.pools=2", "engine.placement=blocks"]),
        tmp_path / "blocks",
        backend="ray",
    )
    metrics = rows(tmp_path / "local" / "metrics.parquet")
    assert metrics[-1]["loss"] != metrics[0]["loss"], "the run did not train"
    placed = roaming["placement"]
    assert placed["pool_placement"] == "least-loaded"
    assert sum(placed["pool_calls"]) == JOBS and min(placed["pool_calls"]) > 0
    assert placed["client_moves"] > 0, "no client changed pools: carried states are not exercised"
    assert blocks["placement"]["pool_placement"] == "blocks" and "pool_calls" not in blocks["placement"]
    same_run(tmp_path / "ray", tmp_path / "local")
    same_run(tmp_path / "blocks", tmp_path / "local")


def test_a_killed_pool_rolls_back_the_carried_states_with_the_checkpoint(ray_session, tmp_path, capsys):
    run(scenario_from_dict(FEDAVG), tmp_path / "local", backend="local")
    overrides = ["engine.pools=2", "engine.kill_pool_at_iteration=3", "engine.checkpoint_every=2"]
    summary = run(scenario_from_dict(FEDAVG, overrides), tmp_path / "ray", backend="ray")
    err = capsys.readouterr().err
    assert "fault injection: killed client pool 0" in err and summary["restarts"] == 1
    assert "restarting the workers from checkpoint ckpt-000002.pt" in err
    same_run(tmp_path / "ray", tmp_path / "local")


def test_an_in_process_checkpoint_resumes_with_roaming_clients(ray_session, tmp_path):
    """The checkpoint keeps client states per client, whatever held them: pools or the object store."""
    checkpointed = ["engine.checkpoint_every=2", "engine.keep_checkpoints=5"]
    run(scenario_from_dict(FEDAVG, checkpointed), tmp_path / "full", backend="local")
    crashed = crash_after(tmp_path / "full", tmp_path / "crashed", "ckpt-000004.pt")
    resumed = run(scenario_from_dict(FEDAVG, [*checkpointed, "engine.pools=2"]), crashed, resume=True)
    assert resumed["resumed_from"] == "ckpt-000004.pt"
    assert resumed["placement"]["pool_placement"] == "least-loaded"
    same_run(crashed, tmp_path / "full")


def test_a_method_whose_jobs_span_several_calls_keeps_its_blocks(ray_session, tmp_path):
    sc = {**FEDAVG, "algorithm": {"name": "gas", "params": {"q_s": 2, "q_c": 2}}}
    summary = run(scenario_from_dict(sc, ["engine.pools=2"]), tmp_path / "ray", backend="ray")
    assert summary["placement"]["pool_placement"] == "blocks (the method's client calls are not whole jobs)"
    run(scenario_from_dict(sc), tmp_path / "local", backend="local")
    same_run(tmp_path / "ray", tmp_path / "local")


@pytest.mark.parametrize("method", ["fedbuff", "moon", "feddyn", "port", "fedsa"])
def test_every_kind_of_fl_job_roams_with_the_same_numbers(ray_session, tmp_path, method):
    """Asynchronous jobs (FedBuff), a model kept in the client's state between jobs (MOON's previous local
    model, FedDyn's gradient state), jobs trained only when due (PORT) and per-job learning rates (FedSA)."""
    sc = {**FEDAVG, "federation": {"num_clients": 5, "active_clients": 3}, "algorithm": {"name": method}}
    run(scenario_from_dict(sc), tmp_path / "local", backend="local")
    summary = run(scenario_from_dict(sc, ["engine.pools=2"]), tmp_path / "ray", backend="ray")
    assert summary["placement"]["pool_placement"] == "least-loaded"
    assert min(summary["placement"]["pool_calls"]) > 0
    same_run(tmp_path / "ray", tmp_path / "local")
