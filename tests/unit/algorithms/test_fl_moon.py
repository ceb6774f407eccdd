"""MOON (no Ray): the model-contrastive loss by hand, the representation, the device's previous model."""

import math

import fl_helpers
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fl_helpers import KEY, wt
from torch import nn

from raysfl.algorithms.common.fl_client import FLClient
from raysfl.algorithms.config import TrainConfig
from raysfl.algorithms.moon import MOONObjective, contrastive_loss, representation_and_logits


def test_contrastive_loss_by_hand():
    """sim(z, z_glob) = 1, sim(z, z_prev) = 0, τ = 0.5: ℓ_con = −log(e²/(e² + e⁰)) = log(1 + e^{−2})."""
    z = torch.tensor([[1.0, 0.0], [2.0, 0.0]])
    z_glob = torch.tensor([[3.0, 0.0], [1.0, 0.0]])
    z_prev = torch.tensor([[0.0, 1.0], [0.0, 5.0]])
    assert contrastive_loss(z, z_glob, z_prev, 0.5).item() == pytest.approx(math.log(1 + math.exp(-2)))
    # swapping the positive and the negative: −log(e⁰/(e⁰ + e²)) = log(1 + e²)
    assert contrastive_loss(z, z_prev, z_glob, 0.5).item() == pytest.approx(math.log(1 + math.exp(2)))


def test_representation_is_the_last_layers_input():
    torch.manual_seed(0)
    body = nn.Sequential(nn.Flatten(), nn.Linear(4, 3), nn.ReLU())
    model = nn.Sequential(body, nn.Sequential(nn.Linear(3, 2)))
    x = torch.randn(5, 2, 2)
    z, logits = representation_and_logits(model, x)
    assert z.shape == (5, 3) and torch.equal(z, body(x)) and torch.equal(logits, model(x))
    with pytest.raises(ValueError, match="nn.Linear"):
        MOONObjective(nn.Sequential(nn.Linear(2, 2), nn.ReLU()), 1.0, 0.5)


def test_representation_is_taken_before_the_dropout_in_front_of_the_last_layer():
    """vgg16_bn and cse_fsl_femnist end in Dropout → Linear: a training model's z was dropped out while the
    frozen (eval) global model's was not, so identical weights gave cos(z, z_glob) ≈ 0.6, not 1."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2)).train()
    frozen = MOONObjective(model, 1.0, 0.5).glob  # eval mode, same weights
    x = torch.randn(16, 4)
    z, logits = representation_and_logits(model, x)
    z_glob, _ = representation_and_logits(frozen, x)
    assert torch.equal(z, torch.relu(model[0](x))) and torch.allclose(z, z_glob)
    assert F.cosine_similarity(z, z_glob).min() > 0.9999
    torch.manual_seed(5)
    dropped = model[3](model[2](z))  # the logits still go through the dropout, as in model(x)
    torch.manual_seed(5)
    assert torch.equal(representation_and_logits(model, x)[1], dropped)


def moon_client(mu: float, objective: bool = True):
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2))
    train = TrainConfig(local_iterations=3, batch_size=2, lr=0.1, momentum=0.0, weight_decay=0.0)
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.5]], dtype=np.float32)
    client = FLClient(
        model,
        x,
        np.array([0, 1, 1, 0]),
        lambda a, g: torch.from_numpy(a).float(),
        train,
        objective=MOONObjective(model, mu, 0.5) if objective else None,
    )
    start = {k: v.clone() for k, v in model.state_dict().items()}
    return client, client.init_state(0, np.arange(4), np.random.SeedSequence(4)), start


def test_first_round_is_plain_training_and_the_previous_model_is_kept():
    moon, s_moon, start = moon_client(mu=5.0)
    plain, s_plain, _ = moon_client(mu=0.0, objective=False)
    w_moon = moon.train(s_moon, start)
    w_plain = plain.train(s_plain, start)
    assert all(torch.equal(w_moon[k], w_plain[k]) for k in start)  # no previous model: ℓ_con is off
    assert all(torch.equal(s_moon.memory["prev"][k], w_moon[k]) for k in start)
    # second round from the same global model: the contrastive term now changes the result
    w2_moon = moon.train(s_moon, start)
    w2_plain = plain.train(s_plain, start)
    assert any(not torch.allclose(w2_moon[k], w2_plain[k]) for k in start)
    assert all(torch.equal(s_moon.memory["prev"][k], w2_moon[k]) for k in start)


def test_loss_is_cross_entropy_plus_mu_times_contrastive():
    moon, state, start = moon_client(mu=2.0)
    moon.train(state, start)  # creates the previous model
    model = moon.model
    model.load_state_dict(start)
    params = list(model.parameters())
    moon.objective.begin(state, model, params)
    x, y = torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 1])
    z, logits = representation_and_logits(model, x)
    z_prev = representation_and_logits(moon.objective.prev, x)[0]
    expected = F.cross_entropy(logits, y) + 2.0 * contrastive_loss(z, z.detach(), z_prev, 0.5)
    assert moon.objective.loss(state, model, params, x, y).item() == pytest.approx(expected.item())


def test_server_is_the_data_size_weighted_round_average():
    server = fl_helpers.tiny_server("moon", sizes=(1, 3))
    server.send_model(0)
    server.send_model(1)
    server.on_client_model(0, wt(5.0, 2.0), 1)
    server.on_client_model(1, wt(1.0, 6.0), 3)
    assert torch.equal(server.global_model()[KEY], wt(2.0, 5.0)[KEY])
