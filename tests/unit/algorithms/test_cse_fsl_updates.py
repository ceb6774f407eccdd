"""CSE-FSL's two updates against hand-written SGD: the client's local step (eq. 8) and the server's (eq. 11).

Tiny linear parts (4 inputs → 3 smashed values → 2 classes), plain SGD, so every expected value is a few
autograd gradients and subtractions written out here, independently of the optimizer the code uses.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from raysfl.algorithms.actions import Schedule
from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.common.aux_client import AuxClient
from raysfl.algorithms.common.fsl_policy import FSLCosts, FSLPolicy
from raysfl.algorithms.common.fsl_server import FSLServer
from raysfl.algorithms.cse_fsl import cse_fsl_rules
from raysfl.scenario import scenario_from_dict
from raysfl.system.config import TimingConfig
from raysfl.system.durations import TimeModel
from raysfl.system.table import DeviceTable

LR = 0.1
X = np.array([[0.5, -1.0, 2.0, 0.0], [1.5, 0.5, -0.5, 1.0], [-1.0, 2.0, 0.0, 0.5], [0.0, 0.0, 1.0, -2.0]])
Y = np.array([0, 1, 1, 0])


def scenario(**params):
    return scenario_from_dict(
        {
            "name": "cse-updates",
            "data": {"dataset": "synthetic", "partition": "iid"},
            "model": {"name": "lenet5", "aux": "mlp"},
            "federation": {"num_clients": 1, "active_clients": 1},
            "train": {"batch_size": 4, "lr": LR, "momentum": 0.0, "weight_decay": 0.0},
            "algorithm": {"name": "cse_fsl", "params": {"init_std": 0.0, **params}},
        }
    )


def parts(seed: int = 0) -> tuple[nn.Linear, nn.Linear, nn.Linear]:
    torch.manual_seed(seed)
    return nn.Linear(4, 3), nn.Linear(3, 2), nn.Linear(3, 2)  # x_c, a_c, x_s


def by_hand_eq8(client: nn.Linear, aux: nn.Linear, steps: int) -> list[dict[str, torch.Tensor]]:
    """x_c ← x_c − η ∇_{x_c} F_c and a_c ← a_c − η ∇_{a_c} F_c, F_c = CE(a_c(x_c(z)), y) (eq. 8).

    The batch holds all four samples, so the order the client draws them in does not change the mean loss.
    Returns the parameters before each step and after the last.
    """
    w = {k: v.detach().clone() for k, v in {**_named("c", client), **_named("a", aux)}.items()}
    z, y = torch.tensor(X, dtype=torch.float32), torch.tensor(Y)
    seen = [dict(w)]
    for _ in range(steps):
        leaves = {k: v.clone().requires_grad_(True) for k, v in w.items()}
        smashed = z @ leaves["c.weight"].T + leaves["c.bias"]
        loss = F.cross_entropy(smashed @ leaves["a.weight"].T + leaves["a.bias"], y)
        grads = torch.autograd.grad(loss, list(leaves.values()))
        w = {k: v - LR * g for (k, v), g in zip(w.items(), grads, strict=True)}
        seen.append(dict(w))
    return seen


def _named(prefix: str, module: nn.Module) -> dict[str, torch.Tensor]:
    return {f"{prefix}.{n}": p for n, p in module.named_parameters()}


def client_for(
    recompute: bool, client: nn.Module | None = None, aux: nn.Module | None = None
) -> tuple[AuxClient, object, nn.Module, nn.Module]:
    """A loaded AuxClient over ``client`` and ``aux`` (default: :func:`parts`' linear x_c and a_c)."""
    if client is None or aux is None:
        client, aux, _ = parts()
    sc = scenario(recompute_after_update=recompute)
    host = AuxClient(
        client, aux, X, Y, lambda x, gen: torch.tensor(x, dtype=torch.float32), sc.train,
        recompute_after_update=recompute,
    )  # fmt: skip
    state = host.init_state(0, np.arange(4), np.random.SeedSequence(1))
    weights = {"client": client.state_dict(), "aux": aux.state_dict()}
    host.load(state, weights, LR)
    return host, state, client, aux


def sorted_rows(t: torch.Tensor) -> torch.Tensor:
    """Rows in a fixed order (the client shuffles its samples within the batch)."""
    return t[np.lexsort(t.detach().numpy().T[::-1])]


@pytest.mark.parametrize("recompute", [False, True])
def test_the_client_step_is_eq_8_and_uploads_the_last_batch(recompute):
    host, state, client, aux = client_for(recompute)
    expected = by_hand_eq8(client, aux, steps=3)
    smashed, labels = host.run(state, num_batches=3, upload=True)
    trained = host.weights(state)
    for part, prefix in (("client", "c"), ("aux", "a")):
        for name in ("weight", "bias"):
            assert torch.allclose(trained[part][name], expected[-1][f"{prefix}.{name}"], atol=1e-6)
    # the uploaded smashed data: x_c(z) of the window's last batch, by the model of its forward pass [C],
    # or recomputed by the model after that batch's update (Algorithm 1 line 12 read literally)
    w = expected[-1] if recompute else expected[-2]
    z = torch.tensor(X, dtype=torch.float32)
    assert torch.allclose(sorted_rows(smashed), sorted_rows(z @ w["c.weight"].T + w["c.bias"]), atol=1e-6)
    assert sorted(labels.tolist()) == sorted(Y.tolist())
    before = expected[-2]
    assert not torch.allclose(before["c.weight"], expected[-1]["c.weight"])  # the two readings differ


def test_the_recomputed_upload_leaves_batchnorm_running_statistics_as_the_training_step_left_them():
    """The recompute is not a training step: a BatchNorm client part ends with the same buffers either way."""
    trained, uploads = {}, {}
    for recompute in (False, True):
        torch.manual_seed(0)
        client = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
        host, state, _, _ = client_for(recompute, client, nn.Linear(3, 2))
        uploads[recompute], _ = host.run(state, num_batches=2, upload=True)
        trained[recompute] = host.weights(state)["client"]
    assert int(trained[True]["1.num_batches_tracked"]) == 2  # one update per training step, not 3
    for name, tensor in trained[False].items():
        assert torch.equal(trained[True][name], tensor), name  # parameters and running statistics alike
    assert not torch.allclose(uploads[True], uploads[False])  # the upload itself is the updated model's


def test_the_server_takes_one_sgd_step_per_upload_on_its_single_model_eq_11():
    client, aux, server = parts()
    sc = scenario()
    setup = RunSetup(sc, sc.params, (4,), 2, (np.arange(4),), None)
    model = SimpleNamespace(client=client, server=server, aux=aux)
    test_x, test_y = torch.tensor(X, dtype=torch.float32), torch.tensor(Y)
    logic = FSLServer(setup, cse_fsl_rules(sc.params), model, test_x, test_y, seed=3)
    w = {k: v.detach().clone() for k, v in server.named_parameters()}
    uploads = [  # (client, smashed, labels): three uploads, each one step
        (0, torch.tensor([[1.0, -2.0, 0.5], [0.0, 1.0, 1.0]]), torch.tensor([1, 0])),
        (0, torch.tensor([[2.0, 0.0, -1.0]]), torch.tensor([1])),
        (0, torch.tensor([[-0.5, 0.5, 3.0], [1.0, 1.0, 1.0], [0.0, -1.0, 2.0]]), torch.tensor([0, 0, 1])),
    ]
    for k, acts, labels in uploads:
        assert logic.on_smashed(k, (acts, labels), LR) is None  # a local-loss method returns no gradient
        leaves = {n: v.clone().requires_grad_(True) for n, v in w.items()}
        loss = F.cross_entropy(acts @ leaves["weight"].T + leaves["bias"], labels)
        grads = torch.autograd.grad(loss, list(leaves.values()))
        w = {n: v - LR * g for (n, v), g in zip(w.items(), grads, strict=True)}
    (copy,) = logic.copies.values()  # one server model for all clients
    for name, value in w.items():
        assert torch.allclose(copy.params[name], value, atol=1e-6), name
    assert logic.server_steps == 3 and logic.uploads == 3


@pytest.mark.parametrize("recompute", [False, True])
def test_the_upload_leaves_after_the_forward_pass_or_after_the_step_and_its_recompute(recompute):
    """Emulated time of an upload: the code's upload [C] goes as soon as the uploaded batch's forward pass is
    done (its backward overlaps the transfer); Algorithm 1's [P] (lines 8–12) only after the batch's step and
    one more client forward. Client 0: 1e9 FLOP/s, 1e6 b/s up, 2e6 b/s down; 8 samples, B = 4, h = 2, so
    the round is one call of batches 0 and 1 ending in batch 1's upload."""
    sc = scenario(h=2, recompute_after_update=recompute)
    setup = RunSetup(sc, sc.params, (1, 2, 2), 2, (np.arange(8),), None)
    devices = DeviceTable(
        flops_per_s=np.array([1e9]), uplink_bps=np.array([1e6]), downlink_bps=np.array([2e6])
    )
    time = TimeModel(devices, TimingConfig(), 0.0)
    costs = FSLCosts(
        client_forward_flops=1e6, client_backward_flops=2e6, aux_forward_flops=1e5,
        aux_backward_flops=2e5, server_forward_flops=0.0, server_backward_flops=0.0,
        activation_bytes=100, model_bytes=1000,
    )  # fmt: skip
    policy = FSLPolicy(setup, cse_fsl_rules(sc.params), time, costs, np.random.default_rng(0))
    [upload] = [a for a in policy.start() if isinstance(a, Schedule) and a.kind == "smashed"]
    t_download = 8 * 1000 / 2e6  # 0.004 s
    batch = 4 * (1e6 + 2e6 + 1e5 + 2e5) / 1e9  # forward + backward of x_c and a_c: 0.0132 s per batch
    forward = 4 * 1e6 / 1e9  # x_c's forward on one batch: 0.004 s
    transfer = 8 * 4 * (100 + 8) / 1e6  # smashed data + int64 labels of 4 samples: 0.003456 s
    ready = t_download + 2 * batch + forward if recompute else t_download + batch + forward
    assert upload.t == pytest.approx(ready + transfer, rel=1e-12)
    assert upload.data["j"] == 1
