"""The GAS code's shared optimizer for its FL baselines (``optimizer_state = "shared"``, GAS spec §10.1 [C]).

One optimizer object serves every job of the code's FedAvg, FedBuff and CA2FL, so SGD's momentum buffers
carry from one client's job to the next; its FedBuff and CA2FL train a job at its finish time, so the
buffer passes through the jobs in the order they finish.
"""

import fl_helpers
import numpy as np
import pytest
import torch
from torch import nn

from raysfl.algorithms.actions import CLIENT, SERVER, Call, Event, Schedule
from raysfl.algorithms.common.fl_client import FLClient
from raysfl.algorithms.config import TrainConfig
from raysfl.config import ConfigError
from raysfl.scenario import scenario_from_dict

TRAIN = TrainConfig(
    local_iterations=2, batch_size=2, lr=0.1, momentum=0.9, weight_decay=1e-3, clip_grad_norm=0.5
)
XS = np.linspace(-1, 1, 6, dtype=np.float32).reshape(6, 1)
YS = np.array([0, 1, 0, 1, 1, 0])


def _client(shared: bool) -> FLClient:
    lin = nn.Linear(1, 2, bias=False)
    to_float = lambda x, g: torch.from_numpy(x).float()  # noqa: E731
    return FLClient(nn.Sequential(lin), XS, YS, to_float, TRAIN, shared_optimizer_state=shared)


def _two_jobs(shared: bool) -> tuple[dict, dict]:
    """Client 0's job from w_a, then client 1's from w_b, in one pool."""
    client = _client(shared)
    a = client.init_state(0, np.arange(0, 3), np.random.SeedSequence(1))
    b = client.init_state(1, np.arange(3, 6), np.random.SeedSequence(2))
    first = client.train(a, {"0.weight": torch.tensor([[0.3], [-0.2]])})
    second = client.train(b, {"0.weight": torch.tensor([[-0.5], [0.4]])})
    return first, second


def test_a_shared_optimizer_carries_momentum_from_one_clients_job_to_the_next():
    """The code's form by hand: one SGD object over one parameter, each job's weights copied into it."""
    client = _client(True)
    batches = []
    for k, (indices, seed) in enumerate(((np.arange(0, 3), 1), (np.arange(3, 6), 2))):
        state = client.init_state(k, indices, np.random.SeedSequence(seed))
        batches.append([client.next_batch(state) for _ in range(2)])
    w = torch.zeros(2, 1, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1, momentum=0.9, weight_decay=1e-3)
    for start, job in zip(([[0.3], [-0.2]], [[-0.5], [0.4]]), batches, strict=True):
        with torch.no_grad():
            w.copy_(
                torch.tensor(start)
            )  # load_state_dict into the one module: the optimizer keeps its buffers
        for x, y in job:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(x @ w.T, y).backward()
            torch.nn.utils.clip_grad_norm_([w], 0.5)
            opt.step()
    first, second = _two_jobs(shared=True)
    assert torch.allclose(second["0.weight"], w.detach(), atol=1e-7)
    fresh_first, fresh_second = _two_jobs(shared=False)
    assert torch.equal(first["0.weight"], fresh_first["0.weight"])  # nothing to carry into the first job
    assert (second["0.weight"] - fresh_second["0.weight"]).abs().max() > 1e-3  # the carried momentum


# --- the policy: when each job trains ------------------------------------------------------------------
def _policy(name, params):
    return fl_helpers.fl_policy(name, params, num_clients=6, active=2, local_iterations=2, seed=3)


def _calls(actions):
    return [(a.target, a.method, a.client) for a in actions if isinstance(a, Call) and a.method != "evaluate"]


@pytest.mark.parametrize(
    ("name", "params"),
    [("fedbuff", {"buffer_size": 1}), ("ca2fl", {"buffer_size": 1, "mode": "code", "job_base": "aliased"})],
)
def test_shared_asynchronous_jobs_train_when_due_in_the_order_they_finish(name, params):
    policy = _policy(name, {**params, "optimizer_state": "shared"})
    start = policy.start()
    first = sorted(policy.active)
    assert not [c for c in _calls(start) if c[0] == CLIENT]  # nothing trains at the start
    due = sorted((a.t, a.client) for a in start if isinstance(a, Schedule) and a.kind == "model")
    assert [k for _, k in due] != [] and {k for _, k in due} == set(first)
    t, k = due[0]
    arrival = policy.on_event(Event(t, "model", k, {"job": policy.active[k].token}))
    trained = _calls(arrival)
    assert (CLIENT, "train", k) in trained
    assert trained.index((CLIENT, "train", k)) < trained.index((SERVER, "on_client_model", -1))
    refill = policy.on_event(Event(t, "refill"))
    assert not [c for c in _calls(refill) if c[0] == CLIENT]
    (k1,) = set(policy.active) - set(first)
    (job,) = [a for a in refill if isinstance(a, Schedule) and a.client == k1]
    assert job.data == {"job": policy.active[k1].token}  # a stale event of an earlier job would be ignored
    later = policy.on_event(Event(job.t, "model", k1, job.data))
    assert (CLIENT, "train", k1) in _calls(later)


def test_per_job_asynchronous_jobs_still_train_at_their_start():
    start = _policy("fedbuff", {"buffer_size": 1}).start()
    assert len([c for c in _calls(start) if c[:2] == (CLIENT, "train")]) == 2


def test_shared_fedavg_trains_a_round_in_the_order_it_starts_it():
    policy = _policy("fedavg", {"optimizer_state": "shared"})
    start = policy.start()
    assert [c[2] for c in _calls(start) if c[0] == CLIENT] == sorted(policy.active)


# --- runs --------------------------------------------------------------------------------------------
BASE = {
    "name": "tiny-shared-optimizer",
    "seed": 5,
    "data": {"dataset": "synthetic", "partition": "shard", "synthetic_train": 600, "synthetic_test": 200},
    "model": {"name": "lenet5"},
    "federation": {"num_clients": 10, "active_clients": 4},
    "train": {"global_iterations": 4, "local_iterations": 3, "batch_size": 16},
    "algorithm": {"name": "fedbuff", "params": {"buffer_size": 3, "mode": "code"}},
    "metrics": {"progress": False, "tensorboard": False, "events": True},
}
METHODS = {
    "fedavg": {},
    "fedbuff": {"buffer_size": 3, "mode": "code"},
    "ca2fl": {"buffer_size": 3, "mode": "code", "job_base": "aliased"},
}


def _doc(method: str, state: str) -> dict:
    return {**BASE, "algorithm": {"name": method, "params": {**METHODS[method], "optimizer_state": state}}}


@pytest.mark.parametrize("method", list(METHODS))
def test_a_shared_run_keeps_the_timing_and_changes_the_learning(tmp_path, method):
    """The option changes what the jobs learn, never when anything happens."""
    _, per_job_events, per_job = fl_helpers.run_scenario(_doc(method, "per-job"), tmp_path, name="per_job")
    _, shared_events, shared = fl_helpers.run_scenario(_doc(method, "shared"), tmp_path, name="shared")
    _, _, again = fl_helpers.run_scenario(_doc(method, "shared"), tmp_path, name="again")
    untimed = lambda rows: [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]  # noqa: E731
    assert untimed(shared) == untimed(again)  # deterministic
    timing = lambda events: [(e["t"], e["kind"], e["client"]) for e in events]  # noqa: E731
    assert timing(shared_events) == timing(per_job_events)
    assert [m["t"] for m in shared] == [m["t"] for m in per_job]
    assert [m["loss"] for m in shared][1:] != [m["loss"] for m in per_job][1:]


@pytest.mark.parametrize("method", ["fedbuff", "ca2fl"])
def test_a_shared_run_resumes_to_the_same_metrics_and_events(tmp_path, method):
    """The carried buffer is part of the pool's checkpointed state: a resumed run continues it."""
    fl_helpers.resumes_identically(_doc(method, "shared"), tmp_path)


@pytest.mark.parametrize("method", list(METHODS))
def test_a_shared_optimizer_needs_one_pool(method):
    doc = {**_doc(method, "shared"), "engine": {"pools": 2}}
    with pytest.raises(
        ConfigError, match=r"algorithm\.params\.optimizer_state: 'shared' .* engine\.pools = 1"
    ):
        scenario_from_dict(doc)
    assert scenario_from_dict({**_doc(method, "per-job"), "engine": {"pools": 2}}).engine.pools == 2
