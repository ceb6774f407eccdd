"""The protocols a method's three pieces of logic satisfy; public as :mod:`raysfl.api` (read that first).

Defined here, beside the actions they return, so method packages can name them (``ServerLogic.evaluate``)
without importing the public module that re-exports the whole API.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from raysfl.algorithms.actions import Action, Event


@runtime_checkable
class ClientLogic(Protocol):
    """The client side of a method; runs in a pool, one call at a time, in submission order.

    Besides :meth:`init_state`, a client logic has the methods its policy calls with
    ``Call(CLIENT, <method>, args, client=k)``; each receives client k's state first, then ``args`` (a
    :class:`Slot` argument arrives as the value the call that filled it returned).

    Random layers (dropout) must draw from the client's stream, not from the process that runs the call
    (:func:`raysfl.api.seeded_if`), or the numbers depend on the pool.

    A logic whose every call is a whole job, reading and writing nothing of the client but its state, may
    set the class attribute ``clients_roam = True``: with ``engine.placement = "least-loaded"`` each call
    then runs in the least-loaded pool and the state travels with it (:mod:`raysfl.engine.balance`).
    """

    def init_state(self, client: int, indices: np.ndarray, seed_seq: np.random.SeedSequence) -> Any:
        """The state of virtual client ``client`` (its sample ``indices``; ``seed_seq`` its own stream).

        Called on the client's first call in a pool, so an idle client costs nothing; every draw of the
        client must come from ``seed_seq``, which makes the run independent of the number of pools.
        """
        ...


@runtime_checkable
class ServerLogic(Protocol):
    """The server side of a method; runs in the server actor, calls in the order the policy made them.

    Besides :meth:`evaluate`, a server logic has the methods its policy calls with
    ``Call(SERVER, <method>, args)``.
    """

    def evaluate(self) -> Mapping[str, Any]:
        """Test metrics of the current global model (at least ``accuracy`` and ``loss``)."""
        ...


@runtime_checkable
class Policy(Protocol):
    """The scheduling logic of a method; runs in the coordinator and draws only from its own stream."""

    def start(self) -> list[Action]:
        """The actions at virtual time 0 (typically: evaluate the initial model, start the first jobs)."""
        ...

    def on_event(self, ev: Event) -> list[Action]:
        """The actions in response to ``ev``, an event one of its :class:`Schedule` actions created."""
        ...

    def global_iteration(self) -> int:
        """Global iterations completed so far; checkpoints are taken every ``engine.checkpoint_every``."""
        ...
