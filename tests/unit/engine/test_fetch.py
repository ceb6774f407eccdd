"""The coordinator's ``fetch``: an event reads a small slot value before the policy sees it."""

import pytest

from raysfl.algorithms.actions import Event, Schedule, Stop
from raysfl.engine.dispatch import LocalDispatcher
from raysfl.engine.loop import Coordinator
from raysfl.engine.policy_errors import PolicyError


class ReadsASlot:
    """Schedules one event that fetches ``("choice", 3)`` and records what it receives."""

    def __init__(self) -> None:
        self.seen: list[Event] = []

    def start(self):
        return [Schedule(1.5, "chosen", 3, {"fetch": ("choice", 3)})]

    def on_event(self, ev):
        self.seen.append(ev)
        return [Stop("done")]


def test_fetch_hands_the_value_to_the_policy_and_frees_the_slot():
    dispatcher = LocalDispatcher(clients=None, server=None)
    dispatcher.slots[("choice", 3)] = 4
    dispatcher.slots[("other", 1)] = "kept"
    policy = ReadsASlot()
    totals = Coordinator(policy, dispatcher, sinks=[]).run()
    (ev,) = policy.seen
    assert (ev.t, ev.kind, ev.client, ev.data) == (1.5, "chosen", 3, {"fetch": ("choice", 3), "value": 4})
    assert dispatcher.slots == {("other", 1): "kept"}
    assert totals.stop_reason == "done"


def test_fetching_a_slot_nobody_filled_is_an_error():
    dispatcher = LocalDispatcher(clients=None, server=None)
    with pytest.raises(PolicyError, match=r"the policy fetched slot \('choice', 3\), which no earlier Call"):
        Coordinator(ReadsASlot(), dispatcher, sinks=[]).run()
