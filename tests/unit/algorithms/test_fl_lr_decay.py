"""``train.lr_decay`` for the full-model FL family: η·decay^j with j = rounds (synchronous) or ⌊accepted
arrivals / C⌋ (asynchronous), FedASMU's schedule; refused for methods that do not apply it."""

import fl_helpers
import pytest

from raysfl.algorithms.actions import CLIENT, Call, Event
from raysfl.config import ConfigError
from raysfl.scenario import scenario_from_dict


def policy(name, decay, params=None, active=2):
    train = {} if decay is None else {"lr_decay": decay}
    return fl_helpers.fl_policy(
        name, params or {}, num_clients=6, active=active, local_iterations=2, seed=3, train=train
    )


def train_args(actions):
    """{client: the arguments after the model} of the ``train`` calls among ``actions``."""
    return {a.client: a.args[1:] for a in actions if isinstance(a, Call) and a.target == CLIENT}


def arrive(p, t, k):
    """Client k's model arrives at t; the refill that follows; the new jobs' train arguments."""
    p.on_event(Event(t, "model", k))
    return train_args(p.on_event(Event(t, "refill")))


def test_asynchronous_jobs_decay_once_per_c_accepted_arrivals():
    p = policy("fedasync", 0.5)
    first = train_args(p.start())
    assert sorted(first.values()) == [(1.0,), (1.0,)]  # j = 0: the factor 1 is sent explicitly
    factors = []
    for _ in range(4):  # the oldest active job arrives, its replacement starts
        new = arrive(p, 3.0, min(p.active))
        factors.append(list(new.values()))
    # accepted arrivals 1, 2, 3, 4 → j = ⌊n / C⌋ = 0, 1, 1, 2 for the job started after each
    assert factors == [[(1.0,)], [(0.5,)], [(0.5,)], [(0.25,)]] and p.accepted == 4


def test_synchronous_rounds_decay_once_per_round():
    p = policy("fedavg", 0.5)
    first = train_args(p.start())
    assert sorted(first.values()) == [(1.0,), (1.0,)]
    a, b = sorted(first)
    p.on_event(Event(3.0, "model", a))
    p.on_event(Event(3.0, "model", b))
    assert p.version == 1
    second = train_args(p.on_event(Event(3.0, "refill")))
    assert sorted(second.values()) == [(0.5,), (0.5,)]  # round 2: j = 1


def test_no_decay_sends_no_factor_as_before():
    p = policy("fedasync", None)
    first = train_args(p.start())
    assert sorted(first.values()) == [(), ()]
    a, b = sorted(first)
    arrive(p, 3.0, a)
    assert list(arrive(p, 3.0, b).values()) == [()]


def test_the_decay_multiplies_a_methods_own_factor():
    """FedSA sends its frequency factor η_i/η with every job; the decay multiplies it."""
    plain, decayed = policy("fedsa", None), policy("fedsa", 0.5)
    out = []
    for p in (plain, decayed):
        a, b = sorted(train_args(p.start()))
        arrive(p, 3.0, a)
        out.append(arrive(p, 3.0, b))
    assert out[0].keys() == out[1].keys()
    (k,) = out[0]
    assert out[1][k][0] == pytest.approx(0.5 * out[0][k][0])


@pytest.mark.parametrize("name", ["gas", "fedssmu"])
def test_methods_that_do_not_apply_it_refuse_it(name):
    doc = {
        "name": "decay",
        "data": {"dataset": "synthetic", "partition": "iid"},
        "model": {"name": "lenet5"},
        "train": {"lr_decay": 0.99},
        "algorithm": {"name": name},
    }
    why = rf"train.lr_decay: 0.99 is applied by the full-model FL .* not by '{name}'.*train_lr_decay = True"
    with pytest.raises(ConfigError, match=why):
        scenario_from_dict(doc)
    doc["train"]["lr_decay"] = 1.5
    with pytest.raises(ConfigError, match="train.lr_decay"):
        scenario_from_dict({**doc, "algorithm": {"name": "fedavg"}})
