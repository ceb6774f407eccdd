"""The example method with a fault planted in its logic, for tests of how a run reports it.

``algorithm.name = "tests.faulty_methods:SERVER_FAILS"``: the server's ``receive`` raises on
the third arrival. ``...:CLIENT_FAILS``: a client's ``train`` raises in the fourth job; its clients roam
(``engine.placement = "least-loaded"`` then sends each job to any pool, with its state). ``EVAL_*``: the
server's ``evaluate`` returns tensors and NumPy scalars, no ``accuracy``, or a vector. ``MISTAKES``: a
policy's mistakes; ``OWN_COLUMNS`` (no fault): a method that declares event-log columns of its own;
``MUTATES_RECEIVED``: a client that zeroes the global model it received, in place, after training from it;
``UNBUILDABLE_POLICY``: a policy factory that builds an object without the protocol's members.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from examples.fedasync_hinge.method import SPEC, HingeClient, HingeClientState, HingePolicy, HingeServer
from examples.fedasync_hinge.test_fedasync_hinge import SCENARIO, TINY
from raysfl.scenario import Scenario, load_scenario

METHODS = "tests.faulty_methods"
# 12 arrivals and at most 32 calls in flight: a fault's run would otherwise end normally
LONGER = [*TINY, "train.global_iterations=12", "train.eval_every=4"]


def faulty_scenario(spec: str, *overrides: str) -> Scenario:
    """The example's tiny scenario (synthetic data, 12 arrivals) with this module's ``spec`` as method."""
    return load_scenario(SCENARIO, [*LONGER, f'algorithm.name="{METHODS}:{spec}"', *overrides])


class InjectedFaultError(ValueError):
    """What the planted faults raise."""


class ServerFailsOnThirdArrival(HingeServer):
    def receive(self, client: int, trained: Mapping[str, torch.Tensor]) -> None:
        if self.version == 2:
            raise InjectedFaultError(f"planted: receive of client {client}'s model, arrival 3")
        super().receive(client, trained)


class ClientFailsInFourthJob(HingeClient):
    clients_roam = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.jobs = 0  # jobs this pool ran

    def train(self, st: HingeClientState, weights: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        self.jobs += 1
        if self.jobs == 4:
            raise InjectedFaultError("planted: train, job 4")
        return super().train(st, weights)


def _variant(
    name: str, client: Any = HingeClient, server: Any = HingeServer, policy: Any = HingePolicy, **more: Any
):  # noqa: ANN202
    """The example's spec under ``name`` with other logic classes (or a policy factory), listed as state."""
    logic = tuple(c for c in (client, HingeClientState, server, policy) if isinstance(c, type))
    return dataclasses.replace(
        SPEC,
        name=name,
        make_client=client,
        make_server=server,
        make_policy=policy,
        state_classes=logic,
        **more,
    )


CLIENT_FAILS = _variant("fedasync_hinge_client_fails", client=ClientFailsInFourthJob)


class ClientThatCannotBeBuilt(HingeClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise InjectedFaultError("planted: the client logic cannot be built")


CLIENT_UNBUILDABLE = _variant("fedasync_hinge_client_unbuildable", client=ClientThatCannotBeBuilt)


class ServerFailsInSecondEvaluation(HingeServer):
    def evaluate(self) -> dict[str, Any]:
        if self.version > 0:
            raise InjectedFaultError(f"planted: evaluate at version {self.version}")
        return super().evaluate()


class ServerReturnsTensors(HingeServer):
    """``evaluate`` returns 0-d tensors and NumPy scalars, as a first-time author easily does."""

    def evaluate(self) -> dict[str, Any]:
        import numpy as np

        out = super().evaluate()
        return {
            "accuracy": torch.tensor(out["accuracy"], dtype=torch.float64),
            "loss": np.float32(out["loss"]),
            "alpha": 0.5,
        }


class ServerWithoutAccuracy(HingeServer):
    def evaluate(self) -> dict[str, Any]:
        out = super().evaluate()
        return {"acc": out["accuracy"], "loss": out["loss"]}


class ServerReturnsAVector(HingeServer):
    def evaluate(self) -> dict[str, Any]:
        return {**super().evaluate(), "per_class": torch.zeros(10)}


class ServerReturnsAnEngineColumn(HingeServer):
    """Its metrics name two of the row's engine columns, which used to overwrite them in every row."""

    def evaluate(self) -> dict[str, Any]:
        return {**super().evaluate(), "iteration": 123, "bytes_up": 5}


SERVER_FAILS = _variant("fedasync_hinge_server_fails", server=ServerFailsOnThirdArrival)
EVALUATE_FAILS = _variant("fedasync_hinge_evaluate_fails", server=ServerFailsInSecondEvaluation)
EVAL_TENSORS = _variant("fedasync_hinge_eval_tensors", server=ServerReturnsTensors)
EVAL_NO_ACCURACY = _variant("fedasync_hinge_eval_no_accuracy", server=ServerWithoutAccuracy)
EVAL_VECTOR = _variant("fedasync_hinge_eval_vector", server=ServerReturnsAVector)
EVAL_CLASH = _variant("fedasync_hinge_eval_clash", server=ServerReturnsAnEngineColumn)


class PolicyWithMistakes(HingePolicy):
    """One of a first-time author's mistakes, chosen by ``algorithm.params.b`` (the hinge's b, unused here).

    b = 90: ``start()`` forgets its ``return``; 91: ``on_event`` returns a bare ``Call``; 92: a call reads a
    slot nobody produced; 93: ``Call(CLIENT, HingeServer.send_model)``; 94: an event in the past; 95: a
    client call without ``client=``; 96: a client call for client K; 97: a ``Report`` without its
    ``iteration``; 98: a log row with a column nobody declared; 99: a tensor in a log column; 100: a
    float in an integer column; 101: a ``Report`` whose info holds ``bytes_up``, which the engine writes.
    """

    def start(self) -> Any:
        actions = super().start()
        return None if self.setup.params.b == 90 else actions

    def on_event(self, ev: Any) -> Any:
        from raysfl.api import CLIENT, SERVER, Call, Log, Report, Schedule, Slot

        mistake = self.setup.params.b
        if mistake == 91:
            return Call(SERVER, HingeServer.evaluate)
        if mistake == 92:
            return [Call(SERVER, HingeServer.receive, (ev.client, Slot(("nope", 2))))]
        if mistake == 93:
            return [Call(CLIENT, HingeServer.send_model, (ev.client,), client=ev.client)]
        if mistake == 94:
            return [Schedule(ev.t - 1.0, "arrival", ev.client)]
        if mistake in (95, 96):
            client = {95: -1, 96: self.setup.num_clients}[mistake]
            return [Call(CLIENT, HingeClient.train, (Slot(("w",)),), client=client)]
        if mistake in (97, 101):
            info = {"t": ev.t} if mistake == 97 else {"iteration": 1, "t": ev.t, "bytes_up": 0}
            return [Call(SERVER, HingeServer.evaluate, out=Slot(("eval",))), Report(Slot(("eval",)), info)]
        actions = super().on_event(ev)
        if mistake in (98, 99, 100):
            (log,) = [a for a in actions if isinstance(a, Log) and a.row["kind"] == "arrival"]
            value = {98: ("my_note", "x"), 99: ("staleness", torch.tensor(2)), 100: ("staleness", 2.0)}[
                mistake
            ]
            log.row[value[0]] = value[1]
        return actions


MISTAKES = _variant("fedasync_hinge_mistakes", policy=PolicyWithMistakes)


class PolicyWithColumns(HingePolicy):
    """Logs two columns of its own on every arrival: ``hinge_b`` (float64) and ``odd_version`` (bool)."""

    def on_event(self, ev: Any) -> Any:
        from raysfl.api import Log

        actions = super().on_event(ev)
        for a in actions:
            if isinstance(a, Log) and a.row["kind"] == "arrival":
                a.row.update(hinge_b=float(self.setup.params.b), odd_version=a.row["version"] % 2 == 1)
        return actions


OWN_COLUMNS = _variant(
    "fedasync_hinge_own_columns",
    policy=PolicyWithColumns,
    event_columns={"hinge_b": "float64", "odd_version": "bool"},
)


class ClientZeroesWhatItReceived(HingeClient):
    """Zeroes, in place, the global model it received once its job has trained from it (a careless reuse of
    a buffer). Between processes that changes only the client's copy, and so it must in one process."""

    def train(self, st: HingeClientState, weights: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        trained = super().train(st, weights)
        for value in weights.values():
            value.zero_()
        return trained


MUTATES_RECEIVED = _variant("fedasync_hinge_mutates_received", client=ClientZeroesWhatItReceived)


def policy_lacking_its_members(setup: Any, time_model: Any, profile: Any, rng: Any):  # noqa: ANN201
    """A factory without a return annotation, so only what it builds can be checked: a run's set-up fails."""
    return object()


UNBUILDABLE_POLICY = _variant("fedasync_hinge_unbuildable_policy", policy=policy_lacking_its_members)
