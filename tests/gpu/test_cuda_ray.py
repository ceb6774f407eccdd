"""The Ray backend with its server actor on a GPU: the actor gets the GPU, and the run is the local one.

Skipped without CUDA (``RAYSFL_TEST_SERVER_DEVICE=cpu`` runs it with a CPU server) or without Ray. On a GPU
machine the server actor is placed with ``num_gpus = 1`` (``cluster.actor_options``), receives the pools'
activations through the object store and moves them to its device; the metrics must equal, bit for bit,
those of the same scenario on the local backend, where the server runs in the test process on the same GPU.
"""

from __future__ import annotations

import pytest
import torch

from raysfl.engine import runner
from tests.gpu.test_cuda_server import DEVICE, scenario
from tests.unit.engine.test_checkpoint_resume import rows

pytest.importorskip("ray")
pytestmark = pytest.mark.skipif(
    DEVICE == "cuda" and not torch.cuda.is_available(), reason="torch sees no CUDA device"
)


@pytest.mark.parametrize("name", ["gas", "splitfed_v1", "lightweight_fedsl", "fedavg"])
def test_the_server_actor_runs_on_the_gpu_and_the_run_equals_the_local_one(name, tmp_path, ray_session):
    sc = scenario(name, DEVICE, pools=2, checkpoint_every=0)
    local = runner.run(sc, tmp_path / "local", backend="local")
    on_ray = runner.run(sc, tmp_path / "ray", backend="ray")
    placement = on_ray["placement"]
    assert placement["device"] == DEVICE, placement
    if DEVICE == "cuda":
        assert placement["device_name"] == torch.cuda.get_device_name(0)
    assert rows(tmp_path / "ray" / "metrics.parquet") == rows(tmp_path / "local" / "metrics.parquet")
    assert rows(tmp_path / "ray" / "events.parquet") == rows(tmp_path / "local" / "events.parquet")
    assert on_ray["final_accuracy"] == local["final_accuracy"]
