"""MOON (no Ray): the model-contrastive loss by hand, the representation, the device's previous model."""

import math

import fl_helpers
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fl_helpers import KEY, wt
from torch import nn

from raysfl.algorithms import ALGORITHMS
from raysfl.algorithms.actions import Call, Event, Schedule
from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.common.fl_client import FLClient
from raysfl.algorithms.config import TrainConfig
from raysfl.algorithms.moon import MOONObjective, contrastive_loss, representation_and_logits
from raysfl.models.flops import profile_split_model
from raysfl.models.zoo import build_split_model
from raysfl.scenario import scenario_from_dict


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


TINY = {
    "name": "tiny-moon",
    "seed": 5,
    "data": {"dataset": "synthetic", "partition": "shard", "synthetic_train": 400, "synthetic_test": 100},
    "model": {"name": "lenet5"},
    "train": {"local_iterations": 2, "batch_size": 16, "eval_every": 1},
    "metrics": {"progress": False, "tensorboard": False, "events": False},
}


# --- emulated time: the frozen forward passes, charged on request ------------------------------------------
class FlopTime:
    """Compute time 0.1 s per FLOP per sample; transfers 1 s each way."""

    def download_s(self, k, nbytes):
        return 1.0

    def compute_s(self, k, flops, batch):
        return 0.1 * flops * batch

    def upload_s(self, k, nbytes):
        return 1.0


class OneTwoProfile(fl_helpers.StubProfile):
    """F = 1 and B = 2 FLOPs per sample."""

    full_forward_flops, full_backward_flops = 1.0, 2.0


def moon_policy(params):
    sc = scenario_from_dict(
        {
            "name": "moon-policy",
            "data": {"dataset": "synthetic", "partition": "iid"},
            "model": {"name": "lenet5"},
            "federation": {"num_clients": 3, "active_clients": 3},
            "train": {"local_iterations": 3, "batch_size": 1},
            "algorithm": {"name": "moon", "params": params},
        }
    )
    setup = RunSetup(sc, sc.params, (1, 1, 1), 2, tuple(np.arange(4) for _ in range(3)), None)
    return ALGORITHMS["moon"].make_policy(setup, FlopTime(), OneTwoProfile(), np.random.default_rng(0))


def train_paces(policy, rounds):
    """client -> pace_s of each train call, per round, driving the policy's events in time order."""
    paces = [{}]
    pending = []

    def take(actions):
        for a in actions:
            if isinstance(a, Call) and a.method == "train":
                if a.client in paces[-1]:
                    paces.append({})
                paces[-1][a.client] = a.pace_s
            elif isinstance(a, Schedule):
                pending.append(Event(a.t, a.kind, a.client, a.data))

    take(policy.start())
    while pending and len(paces) <= rounds:
        pending.sort(key=lambda e: e.t)
        take(policy.on_event(pending.pop(0)))
    return paces[:rounds]


@pytest.mark.parametrize(
    ("params", "second"),
    [
        ({}, 2.9),  # not charged [A]: 1 + 3 steps · 0.1·(F + B) + 1 = 2.9 s, every job
        ({"charge_frozen_passes": True}, 3.5),  # from the second job: 1 + 3 · 0.1·(3F + B) + 1 = 3.5 s
        ({"charge_frozen_passes": True, "mu": 0.0}, 2.9),  # μ = 0 runs no frozen pass
    ],
)
def test_frozen_passes_are_charged_from_a_devices_second_job_when_asked(params, second):
    """C = K = 3, E = 3, batch 1: every device trains in both rounds; its first job has no previous model."""
    first, again = train_paces(moon_policy(params), rounds=2)
    assert first == pytest.approx({0: 2.9, 1: 2.9, 2: 2.9})
    assert again == pytest.approx({0: second, 1: second, 2: second})


def test_charging_the_frozen_passes_moves_only_the_clock(tmp_path):
    """A real run (LeNet-5, near-free links): the same draws and weights, and each job of a device that
    trained before lasts (3F + B)/(F + B) times as long, F and B LeNet-5's measured FLOPs per sample."""
    doc = {
        **TINY,
        "federation": {"num_clients": 5, "active_clients": 2},
        "train": {**TINY["train"], "global_iterations": 4},
        "algorithm": {"name": "moon", "params": {"mu": 1.0}},
        "system": {"link": {"kind": "fixed", "uplink_bps": 1e18, "downlink_bps": 1e18}},
        "metrics": {**TINY["metrics"], "events": True},
    }
    _, off_events, off = fl_helpers.run_scenario(doc, tmp_path, name="off")
    _, on_events, on = fl_helpers.run_scenario(
        doc, tmp_path, ["algorithm.params.charge_frozen_passes=true"], name="on"
    )
    assert [(m["loss"], m["accuracy"]) for m in on] == [(m["loss"], m["accuracy"]) for m in off]
    sc = scenario_from_dict(doc)
    prof = profile_split_model(build_split_model(sc.model, 1, 28, 10, seed=0))
    f, b = prof.full_forward_flops, prof.full_backward_flops
    off_jobs, on_jobs = job_durations(off_events), job_durations(on_events)
    assert off_jobs.keys() == on_jobs.keys()
    seen, repeats = set(), 0
    for (version, k), dur in sorted(off_jobs.items()):
        ratio = on_jobs[version, k] / dur
        assert ratio == pytest.approx((3 * f + b) / (f + b) if k in seen else 1.0, rel=1e-6)
        repeats += k in seen
        seen.add(k)
    assert repeats >= 2  # seed 5 draws some devices again in 4 rounds of 2 of 5


def test_resume_with_charged_frozen_passes(tmp_path):
    """The policy's job counts (which devices have a previous model) survive a crash and a resume."""
    doc = {
        **TINY,
        "federation": {"num_clients": 5, "active_clients": 2},
        "train": {**TINY["train"], "global_iterations": 4},
        "algorithm": {"name": "moon", "params": {"charge_frozen_passes": True}},
        "metrics": {**TINY["metrics"], "events": True},
    }
    fl_helpers.resumes_identically(doc, tmp_path)


def job_durations(events):
    """(version, client) -> download-to-upload time of each job."""
    starts = {(e["version"], e["client"]): e["t"] for e in events if e["kind"] == "start"}
    return {
        (e["version"], e["client"]): e["t"] - starts[e["version"], e["client"]]
        for e in events
        if e["kind"] == "model"
    }
