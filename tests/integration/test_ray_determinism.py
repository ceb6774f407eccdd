"""Same scenario + seed ⇒ identical metrics: in-process, 1 Ray pool, 3 Ray pools (DESIGN property 3)."""

import pyarrow.parquet as pq
import pytest

from raysfl.engine.provenance import mixed_processors_note, processor_name
from raysfl.engine.runner import run
from raysfl.scenario import scenario_from_dict
from tests.scenarios import TINY_GAS

TINY = TINY_GAS


def _metrics(out):
    rows = pq.read_table(out / "metrics.parquet").to_pylist()
    return [(r["iteration"], r["t"], r["accuracy"], r["loss"], r["bytes_up"]) for r in rows]


def _events(out):
    return pq.read_table(out / "events.parquet").to_pylist()


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    run(scenario_from_dict(TINY), out, backend="local")
    return out


@pytest.mark.parametrize("pools", [1, 3])
def test_ray_pools_match_the_local_reference(ray_session, local_reference, tmp_path, pools):
    out = tmp_path / f"pools{pools}"
    summary = run(scenario_from_dict(TINY, [f"engine.pools={pools}"]), out, backend="ray")
    assert summary["global_iterations"] == 2
    assert _metrics(out) == _metrics(local_reference)
    assert _events(out) == _events(local_reference)
    assert (out / "tb").is_dir() and any((out / "tb").iterdir())
    # every actor names its node's processor model (one machine here: the driver's), and no note is due
    placement = summary["placement"]
    assert (
        placement["processor"] == processor_name()
        and placement["pool_processors"] == [processor_name()] * pools
    )
    assert mixed_processors_note(placement) is None


FEDASMU = {
    "name": "tiny-fedasmu-ray",
    "seed": 5,
    "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 400, "synthetic_test": 100},
    "model": {"name": "lenet5"},
    "federation": {"num_clients": 6, "active_clients": 3},
    "train": {"global_iterations": 8, "batch_size": 16, "eval_every": 4, "lr": 0.05, "momentum": 0.0},
    "algorithm": {
        "name": "fedasmu",
        "params": {"local_epochs": 4, "epoch_steps": 2, "trigger_period": 0.02, "request_slot": "rl"},
    },
    "system": {"compute": {"kind": "ratio", "max_flops_per_s": 1e9}},
    "metrics": {"progress": False},
}


def test_fetched_values_keep_ray_runs_equal_to_local(ray_session, tmp_path):
    """FedASMU's RL slots are fetched from the devices (engine ``fetch``): 2 Ray pools match in-process."""
    local, remote = tmp_path / "local", tmp_path / "ray"
    run(scenario_from_dict(FEDASMU), local, backend="local")
    run(scenario_from_dict(FEDASMU, ["engine.pools=2"]), remote, backend="ray")
    events = _events(local)
    assert any(e["kind"] == "fresh" for e in events), "no fresh download: the fetch path is not exercised"
    assert _metrics(remote) == _metrics(local)
    assert _events(remote) == events


def _fmnist(data_dir):
    """GAS on the real Fashion-MNIST. Its IDX reader once gave the channel axis stride 0, so the local run
    convolved batches torch reads as channels-last and Ray (standard strides after the object store) did
    not: the two differed in the last bits from the first client forward on (synthetic data never did)."""
    return {
        "name": "fmnist-gas-ray",
        "seed": 2023,
        "data": {"dataset": "fashion-mnist", "partition": "shard", "data_dir": str(data_dir)},
        "model": {"name": "lenet5"},
        "federation": {"num_clients": 5, "active_clients": 3},
        "train": {"global_iterations": 1, "local_iterations": 3, "batch_size": 32, "eval_every": 1},
        "algorithm": {"name": "gas", "params": {"q_s": 3, "q_c": 3}},
        "metrics": {"progress": False, "tensorboard": False},
    }


def test_real_one_channel_data_gives_the_same_bits_locally_and_on_ray(ray_session, fmnist_dir, tmp_path):
    def rows(out):
        table = pq.read_table(out / "metrics.parquet").to_pylist()
        return [{k: v for k, v in r.items() if k != "wall_s"} for r in table]

    run(scenario_from_dict(_fmnist(fmnist_dir)), tmp_path / "local", backend="local")
    run(scenario_from_dict(_fmnist(fmnist_dir)), tmp_path / "ray", backend="ray")
    assert rows(tmp_path / "ray") == rows(tmp_path / "local")


def _dropout_scenario(method: str) -> dict:
    """A tiny run of a model with dropout on both sides of the cut (ViT-small, narrowed)."""
    return {
        "name": f"dropout-{method}",
        "seed": 8,
        "data": {
            "dataset": "synthetic",
            "partition": "iid",
            "synthetic_train": 240,
            "synthetic_test": 60,
            "synthetic_channels": 3,
            "synthetic_image_size": 16,
        },
        "model": {"name": "vit_small", "vit_patch_size": 8, "vit_embed_dim": 32},
        "federation": {"num_clients": 4, "active_clients": 3},
        "train": {"global_iterations": 2, "local_iterations": 2, "batch_size": 8},
        "algorithm": {"name": method, **({"params": {"q_s": 2, "q_c": 2}} if method == "gas" else {})},
        "metrics": {"progress": False, "tensorboard": False},
    }


@pytest.mark.parametrize("method", ["fedavg", "gas"])
def test_dropout_masks_do_not_depend_on_the_pool_or_the_process(ray_session, tmp_path, method):
    """Dropout draws from torch's process-global generator. Clients draw from their own streams and the
    server's starts from the scenario seed, so 2 Ray pools, one process, and one process whose generator
    was used before all give the same bits (before the fix the pools' histories leaked into the masks)."""
    import torch

    sc = _dropout_scenario(method)
    run(scenario_from_dict(sc), tmp_path / "local", backend="local")
    torch.manual_seed(12345)
    torch.rand(7)  # what another run in this process might leave behind
    run(scenario_from_dict(sc), tmp_path / "local_again", backend="local")
    run(scenario_from_dict(sc, ["engine.pools=2"]), tmp_path / "ray", backend="ray")
    reference = _metrics(tmp_path / "local")
    assert reference[-1][3] != reference[0][3], "the run did not train"
    assert _metrics(tmp_path / "local_again") == reference
    assert _metrics(tmp_path / "ray") == reference
    assert _events(tmp_path / "ray") == _events(tmp_path / "local")


def test_a_shared_optimizer_run_on_a_ray_pool_equals_the_local_run(ray_session, tmp_path):
    """FedBuff with the GAS code's shared optimizer (jobs trained when due, the momentum carried in the
    pool's client logic, GAS spec §10.1 [C]): the Ray pool's run and its checkpoint equal the local ones."""
    sc = {
        **_dropout_scenario("fedbuff"),
        "algorithm": {
            "name": "fedbuff",
            "params": {"buffer_size": 2, "mode": "code", "optimizer_state": "shared"},
        },
        "engine": {"checkpoint_every": 1},
    }
    run(scenario_from_dict(sc), tmp_path / "local", backend="local")
    run(scenario_from_dict(sc), tmp_path / "ray", backend="ray")
    per_job = scenario_from_dict(sc, ['algorithm.params.optimizer_state="per-job"'])
    run(per_job, tmp_path / "per_job", backend="local")
    assert _metrics(tmp_path / "ray") == _metrics(tmp_path / "local")
    assert _events(tmp_path / "ray") == _events(tmp_path / "local")
    assert _metrics(tmp_path / "per_job")[-1] != _metrics(tmp_path / "local")[-1]  # the momentum was carried
