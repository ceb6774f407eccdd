"""A method for the ``engine.flush_denormal`` tests: the FedAsync-hinge example whose every client and server
call first checks that it runs in the floating-point mode the scenario asks for.

A call in the other mode raises, so a run that finishes has made every call of both roles in that mode, in
whichever process the backend runs it (the test's own, or a Ray actor). Importable by Ray's workers as
``tests.unit.engine.flush_probe:SPEC`` (the repository root is on their path, as for ``examples``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from examples.fedasync_hinge import method as hinge
from raysfl.engine.float_mode import flushing


def _check(role: str, call: str, expected: bool) -> None:
    if flushing() != expected:
        raise RuntimeError(f"{role} call {call} ran with flushing={not expected}, expected {expected}")


class ProbeClient(hinge.HingeClient):
    """The example's client; ``train`` checks the mode first."""

    def __init__(self, setup: Any, *args: Any) -> None:
        super().__init__(setup, *args)
        self.expected = setup.scenario.engine.flush_denormal

    def train(self, st: Any, weights: Any) -> Any:
        """Check the mode, then train as the example does."""
        _check("client", "train", self.expected)
        return super().train(st, weights)


class ProbeServer(hinge.HingeServer):
    """The example's server; every call checks the mode first."""

    def __init__(self, setup: Any, *args: Any) -> None:
        super().__init__(setup, *args)
        self.expected = setup.scenario.engine.flush_denormal

    def send_model(self, client: int) -> Any:
        """Check the mode, then send as the example does."""
        _check("server", "send_model", self.expected)
        return super().send_model(client)

    def receive(self, client: int, trained: Any) -> None:
        """Check the mode, then mix as the example does."""
        _check("server", "receive", self.expected)
        super().receive(client, trained)

    def evaluate(self) -> dict[str, float]:
        """Check the mode, then evaluate as the example does."""
        _check("server", "evaluate", self.expected)
        return super().evaluate()


SPEC = dataclasses.replace(
    hinge.SPEC,
    name="flush_probe",
    make_client=ProbeClient,
    make_server=ProbeServer,
    state_classes=(ProbeClient, hinge.HingeClientState, ProbeServer, hinge.HingePolicy),
)
