"""A client pool process killed mid-run is replaced and the run rolls back to its last checkpoint.

The kill is real: ``engine.kill_pool_at_iteration`` SIGKILLs the pool's OS process. The finished run
must equal the in-process run that nothing disturbed (same metrics, same events), which is the
determinism promise extended across failures.
"""

import pytest

from raysfl.engine.runner import run
from raysfl.scenario import scenario_from_dict
from tests.unit.engine.test_checkpoint_resume import crash_after, rows

TINY = {
    "name": "tiny-gas-faults",
    "seed": 5,
    "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 400, "synthetic_test": 100},
    "model": {"name": "lenet5"},
    "federation": {"num_clients": 8, "active_clients": 3},
    "train": {"global_iterations": 5, "local_iterations": 2, "batch_size": 16},
    "algorithm": {"name": "gas", "params": {"q_s": 3, "q_c": 3, "covariance": "diagonal"}},
    "metrics": {"progress": False, "tensorboard": False},
}


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    run(scenario_from_dict(TINY), out, backend="local")
    return out


@pytest.mark.parametrize("checkpoint_every", [2, 0], ids=["from-checkpoint", "from-start"])
def test_killed_pool_is_replaced_and_the_run_ends_as_if_undisturbed(
    ray_session, undisturbed, tmp_path, checkpoint_every, capsys
):
    overrides = [
        "engine.pools=2",
        "engine.kill_pool_at_iteration=3",
        f"engine.checkpoint_every={checkpoint_every}",
    ]
    summary = run(scenario_from_dict(TINY, overrides), tmp_path / "run", backend="ray")
    err = capsys.readouterr().err
    assert "fault injection: killed client pool 0" in err
    assert summary["restarts"] == 1
    # the user did not resume: the restart's checkpoint is named as such (it was given as resumed_from)
    assert summary["resumed_from"] is None
    assert summary["restarted_from"] == ("ckpt-000002.pt" if checkpoint_every else "start")
    where = "checkpoint ckpt-000002.pt" if checkpoint_every else "the start (no checkpoint yet)"
    assert f"restarting the workers from {where}" in err
    assert summary["global_iterations"] == 5
    assert rows(tmp_path / "run" / "metrics.parquet") == rows(undisturbed / "metrics.parquet")
    assert rows(tmp_path / "run" / "events.parquet") == rows(undisturbed / "events.parquet")


def test_a_checkpoint_resumes_on_another_number_of_pools(ray_session, undisturbed, tmp_path):
    """Checkpointed in-process, resumed on three Ray pools: client states are regrouped by pool."""
    sc = scenario_from_dict(TINY, ["engine.checkpoint_every=2", "engine.keep_checkpoints=5"])
    run(sc, tmp_path / "full", backend="local")
    crashed = crash_after(tmp_path / "full", tmp_path / "crashed", "ckpt-000002.pt")
    resumed = run(
        scenario_from_dict(TINY, ["engine.checkpoint_every=2", "engine.pools=3"]), crashed, resume=True
    )
    assert resumed["resumed_from"] == "ckpt-000002.pt"
    assert rows(crashed / "metrics.parquet") == rows(undisturbed / "metrics.parquet")
    assert rows(crashed / "events.parquet") == rows(undisturbed / "events.parquet")
