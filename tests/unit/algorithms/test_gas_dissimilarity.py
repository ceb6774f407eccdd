"""GAS gradient dissimilarity meter (Assumption 3, Lemma 1, Fig. 2(a)): values by hand, no effect on a run."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.gas import dissimilarity as dis
from raysfl.algorithms.gas.dissimilarity import (
    GradientDissimilarity,
    parameter_gradient,
    squared_distance,
)
from raysfl.algorithms.gas.server import GASServer
from raysfl.config import ConfigError
from raysfl.engine.snapshot import capture, load_tree, rebuild, save_tree
from raysfl.scenario import scenario_from_dict


def _linear(weight, bias):
    layer = nn.Linear(len(weight[0]), len(weight))
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weight))
        layer.bias.copy_(torch.tensor(bias))
    return layer


def test_parameter_gradient_by_hand():
    """Two classes, zero weights: softmax = (1/2, 1/2), so ∂CE/∂z = p − onehot = ∓1/2 per row.

    Rows x1 = (1, 2) with y = 0 and x2 = (3, 0) with y = 1: ∂/∂W = mean of (p − e_y) x^T =
    ((−1/2·(1, 2)) + (1/2·(3, 0))) / 2 = (1/2, −1/2) for class 0 and its negative for class 1; ∂/∂b = (0, 0).
    """
    model = _linear([[0.0, 0.0], [0.0, 0.0]], [0.0, 0.0])
    x, y = torch.tensor([[1.0, 2.0], [3.0, 0.0]]), torch.tensor([0, 1])
    g_w, g_b = parameter_gradient(model, x, y)
    assert torch.allclose(g_w, torch.tensor([[0.5, -0.5], [-0.5, 0.5]]))
    assert torch.allclose(g_b, torch.zeros(2))
    assert model.weight.grad is None  # .grad untouched


def test_parameter_gradient_is_the_mean_whatever_the_chunks(monkeypatch):
    """Chunked sums give the gradient of the mean loss over all rows, as one backward does."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3))
    x, y = torch.randn(10, 5), torch.randint(0, 3, (10,))
    whole = torch.autograd.grad(nn.functional.cross_entropy(model(x), y), list(model.parameters()))
    monkeypatch.setattr(dis, "GRADIENT_ROWS", 3)  # chunks of 3, 3, 3, 1
    for a, b in zip(parameter_gradient(model, x, y), whole, strict=True):
        assert torch.allclose(a, b, atol=1e-7)


def test_squared_distance_by_hand():
    """‖(1, 2) − (0, 0)‖² + ‖(3) − (1)‖² = 1 + 4 + 4 = 9."""
    a = [torch.tensor([1.0, 2.0]), torch.tensor([[3.0]])]
    b = [torch.zeros(2), torch.tensor([[1.0]])]
    d = squared_distance(a, b)
    assert d.dtype == torch.float64 and float(d) == 9.0


def test_meter_measures_against_its_reference_and_reports_means():
    """The batch equal to the reference sample has distance 0; the real rows alone have the hand value.

    Reference: all 4 test rows (samples ≥ 4). The server is a linear layer on flattened inputs, the client
    the identity, so ∇F is the gradient on the 4 test rows and the real-only gradient the one on 2 of them.
    """
    test_x = torch.tensor([[1.0, 2.0], [3.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
    test_y = torch.tensor([0, 1, 1, 0])
    server = _linear([[0.1, -0.2], [0.3, 0.0]], [0.0, 0.1])
    meter = GradientDissimilarity(every=2, samples=10, test_x=test_x, test_y=test_y, seed=0)
    assert [meter.due(i) for i in range(5)] == [True, False, True, False, True]
    g_true = parameter_gradient(server, test_x, test_y)
    g_real = parameter_gradient(server, test_x[:2], test_y[:2])
    meter.measure(nn.Identity(), server, (test_x, test_y), (test_x[:2], test_y[:2]))
    meter.measure(nn.Identity(), server, (test_x[:2], test_y[:2]), None)  # no generated rows
    got = meter.report()
    real = float(squared_distance(g_real, g_true))
    norm2 = sum(float(g.pow(2).sum()) for g in g_true)
    assert real > 0
    assert got["grad_dissimilarity"] == pytest.approx((0.0 + real) / 2, rel=1e-6, abs=1e-12)
    assert got["grad_dissimilarity_real"] == pytest.approx(real, rel=1e-6)
    assert got["grad_reference_norm2"] == pytest.approx(norm2, rel=1e-6)
    assert got["grad_dissimilarity_iid"] is None  # every test row is in the reference: no control pool
    assert meter.report() == dict.fromkeys(got)  # no measurement since: None, not 0


def test_control_batch_comes_from_outside_the_reference():
    """4 test rows, a reference of 2: the control batch of 2 rows is the other 2, whatever the draw."""
    test_x = torch.tensor([[1.0, 2.0], [3.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
    test_y = torch.tensor([0, 1, 1, 0])
    server = _linear([[0.1, -0.2], [0.3, 0.0]], [0.0, 0.1])
    meter = GradientDissimilarity(every=1, samples=2, test_x=test_x, test_y=test_y, seed=3)
    ref_rows = [i for i in range(4) if any(torch.equal(test_x[i], r) for r in meter.reference[0])]
    other = [i for i in range(4) if i not in ref_rows]
    assert len(ref_rows) == 2 and sorted(meter.pool.tolist()) == other
    g_true = parameter_gradient(server, *meter.reference)
    g_other = parameter_gradient(server, test_x[other], test_y[other])
    batch = (test_x[:3], test_y[:3])  # 3 rows asked, 2 in the pool
    for _ in range(2):
        meter.measure(nn.Identity(), server, batch, None)
    got = meter.report()
    assert got["grad_dissimilarity_iid"] == pytest.approx(float(squared_distance(g_other, g_true)), rel=1e-6)


def test_reference_sample_is_fixed_by_the_seed():
    """``samples`` distinct test rows, the same for the same seed, others for another seed."""
    test_x = torch.arange(100.0).reshape(100, 1)
    test_y = torch.zeros(100, dtype=torch.long)
    rows = [GradientDissimilarity(1, 10, test_x, test_y, seed).reference[0].flatten() for seed in (1, 1, 2)]
    assert len(set(rows[0].tolist())) == 10
    assert torch.equal(rows[0], rows[1]) and not torch.equal(rows[0], rows[2])


# --- in the GAS server -------------------------------------------------------------------------------


def _server(every, generate=True):
    sc = scenario_from_dict(
        {
            "data": {"dataset": "synthetic", "synthetic_classes": 3, "partition": "iid"},
            "model": {"name": "lenet5"},
            "federation": {"num_clients": 2, "active_clients": 1},
            "train": {"local_iterations": 2, "batch_size": 4},
            "algorithm": {
                "name": "gas",
                "params": {
                    "q_s": 2,
                    "covariance": "diagonal",
                    "generate": generate,
                    "dissimilarity_every": every,
                    "dissimilarity_samples": 6,
                },
            },
        }
    )
    setup = RunSetup(sc, sc.params, (1, 2, 2), 3, (range(4),) * 6, np.ones((6, 3)))
    torch.manual_seed(0)
    # dropout in the server part: measuring must not draw from torch's generator either
    client = nn.Flatten()
    server = nn.Sequential(nn.Flatten(), nn.Linear(4, 8), nn.Dropout(0.5), nn.ReLU(), nn.Linear(8, 3))
    g = torch.Generator().manual_seed(7)
    test_x, test_y = torch.randn(9, 1, 2, 2, generator=g), torch.randint(0, 3, (9,), generator=g)
    return GASServer(setup, client, server, test_x, test_y, seed=0)


def _feed(srv, arrivals=8):
    for i in range(arrivals):
        g = torch.Generator().manual_seed(i)
        labels = torch.tensor([(i + j) % 3 for j in range(2)])
        srv.on_activations(i % 2, (torch.randn(2, 1, 2, 2, generator=g), labels), 0, 1 + i // 2)


@pytest.mark.parametrize("generate", [True, False])
def test_measuring_leaves_the_run_unchanged(generate):
    """Same arrivals with and without the meter: the same server weights and evaluation, bit for bit."""
    runs = {}
    for every in (0, 1):
        torch.manual_seed(3)
        srv = _server(every, generate)
        _feed(srv)
        runs[every] = (srv.server_model.state_dict(), srv.evaluate(), torch.rand(1))
    (w0, e0, r0), (w1, e1, r1) = runs[0], runs[1]
    assert all(torch.equal(w0[k], w1[k]) for k in w0)
    assert torch.equal(r0, r1)  # torch's global generator advanced alike
    assert {k: e1[k] for k in e0} == e0
    assert "grad_dissimilarity" not in e0
    assert e1["grad_dissimilarity"] > 0 and e1["grad_reference_norm2"] > 0
    assert e1["grad_dissimilarity_iid"] > 0  # 9 test rows, a reference of 6: a pool of 3
    if not generate:  # no generated rows: the update batch is the real one
        assert e1["grad_dissimilarity"] == e1["grad_dissimilarity_real"]
    else:
        assert srv.generated_total > 0
        assert e1["grad_dissimilarity"] != e1["grad_dissimilarity_real"]


def test_meter_counts_its_measurements_and_survives_a_checkpoint(tmp_path):
    """every = 2 over 4 server updates measures 2; the meter's sums come back from a snapshot."""
    srv = _server(2)
    _feed(srv)  # 8 arrivals, q_s = 2: 4 server updates
    assert srv.server_updates == 4 and srv.dissimilarity is not None
    assert srv.dissimilarity._count == 2
    save_tree(capture(srv.dissimilarity), tmp_path / "s.pt")
    back = rebuild(load_tree(tmp_path / "s.pt"))
    assert back._count == 2 and torch.equal(back._sums, srv.dissimilarity._sums)
    assert all(math.isfinite(v) for v in back.report().values())


def test_dissimilarity_options_are_validated():
    """A negative interval names the field."""
    with pytest.raises(ConfigError, match="dissimilarity_every"):
        scenario_from_dict(
            {
                "data": {"dataset": "synthetic"},
                "algorithm": {"name": "gas", "params": {"dissimilarity_every": -1}},
            }
        )
