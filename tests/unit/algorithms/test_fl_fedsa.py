"""FedSA (no Ray): the frequency learning-rate factor, the τ₀ drop and the M-model average by hand, a run."""

import fl_helpers
import numpy as np
import pytest
import torch
from fl_helpers import KEY, wt
from torch import nn

from raysfl.algorithms.common.fl_client import FLClient
from raysfl.algorithms.config import TrainConfig
from raysfl.algorithms.fedsa import frequency_lr_scale

BASE = {
    "name": "tiny-fedsa",
    "seed": 3,
    "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 600, "synthetic_test": 200},
    "model": {"name": "lenet5"},
    "federation": {"num_clients": 8, "active_clients": 4},
    "train": {"global_iterations": 8, "local_iterations": 2, "batch_size": 16, "eval_every": 8},
    "algorithm": {"name": "fedsa", "params": {"buffer_size": 2, "tau0": 0}},
    "metrics": {"progress": False, "tensorboard": False},
}


def test_frequency_factor_by_hand():
    """1/(N·f_i): starts (4, 1, 1, 0) → N = 3, f = (4/6, 1/6, 1/6): factors ½, 2, 2 (cap 2)."""
    starts = [4, 1, 1, 0]
    assert frequency_lr_scale(0, starts, cap=10.0) == pytest.approx(0.5)
    assert frequency_lr_scale(1, starts, cap=10.0) == pytest.approx(2.0)
    assert frequency_lr_scale(1, starts, cap=1.5) == 1.5
    assert frequency_lr_scale(0, [1, 1], cap=2.0) == 1.0
    with pytest.raises(ValueError, match="no job"):
        frequency_lr_scale(3, starts, cap=2.0)


def test_lr_scale_reaches_the_optimizer():
    """One SGD step on x = 1, y = 0 from 0: w = lr·[½, −½]; lr_scale 0.5 halves it."""
    train = TrainConfig(local_iterations=1, batch_size=1, lr=0.1, momentum=0.0, weight_decay=0.0)
    client = FLClient(
        nn.Sequential(nn.Linear(1, 2, bias=False)),
        np.array([[1.0]], dtype=np.float32),
        np.array([0]),
        lambda x, g: torch.from_numpy(x).float(),
        train,
    )
    for scale, expected in ((1.0, 0.05), (0.5, 0.025), (2.0, 0.1)):
        state = client.init_state(0, np.array([0]), np.random.SeedSequence(0))
        out = client.train(state, {"0.weight": torch.zeros(2, 1)}, scale)["0.weight"]
        assert out.flatten().tolist() == pytest.approx([expected, -expected], abs=1e-8)


def test_drop_and_average_by_hand():
    """M = 2, τ₀ = 0, |D| = (1, 3, 1). Clients 0, 1, 2 start at v0; 0 and 1 arrive → w = ¼[3, 2] + ¾[1, 6];
    2 arrives at v1 (staleness 1 > τ₀): dropped, w unchanged."""
    server = fl_helpers.tiny_server("fedsa", {"buffer_size": 2, "tau0": 0}, sizes=(1, 3, 1), active=3)
    for k in (0, 1, 2):
        server.send_model(k)
    server.on_client_model(0, wt(3.0, 2.0), 1)
    server.on_client_model(1, wt(1.0, 6.0), 3)
    assert torch.allclose(server.global_model()[KEY], wt(1.5, 5.0)[KEY])
    server.on_client_model(2, wt(9.0, 9.0), 1)
    assert torch.allclose(server.global_model()[KEY], wt(1.5, 5.0)[KEY])
    ev = server.evaluate()
    assert ev["dropped"] == 1 and ev["buffered"] == 0 and ev["updates"] == 1


def test_delta_aggregation_by_hand():
    """deltas: w + Σ p_i·(w_i − w_{τ_i}); a stale model counts by its update, not by its weights."""
    server = fl_helpers.tiny_server("fedsa", {"buffer_size": 1, "aggregation": "deltas"}, sizes=(1, 1))
    server.send_model(0)
    server.send_model(1)
    server.on_client_model(0, wt(3.0, 2.0), 1)  # w = [3, 2]
    server.on_client_model(1, wt(1.0, 6.0), 1)  # base [1, 2], Δ = [0, 4] → [3, 6]
    assert torch.allclose(server.global_model()[KEY], wt(3.0, 6.0)[KEY])


def test_run_drops_stale_arrivals_without_counting_them(tmp_path):
    summary, events, metrics = fl_helpers.run_scenario(BASE, tmp_path)
    models = [e for e in events if e["kind"] == "model"]
    dropped = [e for e in models if e["staleness"] > 0]  # τ₀ = 0: every stale arrival is dropped
    kept = [e for e in models if e["staleness"] == 0]
    assert dropped and all(e["server_update"] is None for e in dropped)
    assert [e["discarded"] for e in dropped] == [1] * len(dropped)  # flagged in events.parquet
    assert all(e["discarded"] is None for e in kept)
    assert len(kept) == 2 * 8 and [e["server_update"] for e in kept] == [None, 1] * 8
    assert metrics[-1]["dropped"] == len(dropped) and summary["stop_reason"] == "budget reached"


def test_the_learning_rate_options_reach_the_policy():
    """``lr_scaling = "none"`` sends no factor with a job; ``lr_scale_max`` is the cap the factor uses."""
    common = {"num_clients": 4, "active": 2, "local_iterations": 1, "seed": 0}
    assert fl_helpers.fl_policy("fedsa", {"lr_scaling": "none"}, **common).job_lr is None
    scaled = fl_helpers.fl_policy("fedsa", {"lr_scale_max": 3.5}, **common).job_lr
    assert scaled.keywords["cap"] == 3.5
    assert scaled(0, [1, 9, 0, 0]) == pytest.approx(frequency_lr_scale(0, [1, 9, 0, 0], cap=3.5))
