"""Roaming clients (engine.placement = "least-loaded"): a state carried from call to call, and from host to
host, trains exactly as a state kept in one host."""

import torch

from raysfl.engine.hosts import ClientHost
from raysfl.engine.runner import prepare
from raysfl.scenario import scenario_from_dict

FEDAVG = {
    "name": "roaming-fedavg",
    "seed": 3,
    "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 240, "synthetic_test": 40},
    "model": {"name": "lenet5"},
    "federation": {"num_clients": 4, "active_clients": 2},
    "train": {"global_iterations": 1, "local_iterations": 7, "batch_size": 16},  # 60 samples: epochs wrap
    "algorithm": {"name": "fedavg"},
    "metrics": {"progress": False, "tensorboard": False},
}


def _hosts(n: int, name: str = "fedavg") -> list[ClientHost]:
    train = {**FEDAVG["train"], "momentum": 0.0} if name == "fedasmu" else FEDAVG["train"]
    prep = prepare(scenario_from_dict({**FEDAVG, "train": train, "algorithm": {"name": name}}))
    ds = prep.dataset
    return [ClientHost(prep.setup, ds.train_x, ds.train_y, prep.transform) for _ in range(n)]


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_client_trained_in_turn_by_two_hosts_equals_one_that_stays():
    resident, first, second = _hosts(3)
    weights = {k: v.clone() for k, v in resident.logic.model.state_dict().items()}
    tree = None
    for job, host in enumerate([first, second, first, second]):
        expected = resident.call("train", 1, weights)
        got, tree = host.call_carried("train", 1, tree, weights)
        assert _same(got, expected), f"job {job} differs"
        weights = expected
    # nothing of the client stays behind in the hosts that ran it
    assert first.states == {} and second.states == {}
    assert resident.states[1].jobs == 4


def test_the_first_call_starts_from_the_clients_own_seed_stream():
    resident, roaming = _hosts(2)
    weights = {k: v.clone() for k, v in resident.logic.model.state_dict().items()}
    _, tree = roaming.call_carried("train", 2, None, weights)
    resident.call("train", 2, weights)
    again, _ = roaming.call_carried("train", 2, tree, weights)
    assert _same(again, resident.call("train", 2, weights))


def test_which_logics_let_their_clients_roam():
    """The FL family's one-call jobs roam; FedASMU's jobs are several calls with a model in between."""
    assert _hosts(1)[0].clients_roam()
    assert not _hosts(1, "fedasmu")[0].clients_roam()
    assert not _hosts(1, "gas")[0].clients_roam()
