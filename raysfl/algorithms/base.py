"""The algorithm plug-in contract: what a method module must provide to the engine.

An algorithm is a frozen ``Params`` dataclass plus the logic the engine calls; it never imports Ray or the
engine. Each method module ends with ``SPEC = AlgorithmSpec(...)`` and ``raysfl/algorithms/__init__.py``
lists the specs in a literal registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AlgorithmSpec:
    """Registry entry of one method."""

    name: str
    params: type
    description: str
    family: str  # "split" or "fl"
    source: str  # the spec / paper the method follows
    make_client: Any = None  # (setup, model, train_x, train_y, transform) -> client logic (in a pool)
    make_server: Any = None  # (setup, model, test_x, test_y, seed, device) -> server logic (server actor)
    make_policy: Any = None  # (setup, time_model, model_profile, rng) -> policy (coordinator)
    validate: Any = None  # (scenario, params) -> list of problems naming fields, for cross-section rules
    # every class (besides ``params`` and the engine's own) whose instances the policy, client logic, client
    # states or server logic keep between calls: the only classes a checkpoint may recreate
    # (``raysfl.engine.snapshot.state_classes``); one missing here makes checkpointing fail, naming it
    state_classes: tuple[type, ...] = ()


@dataclass(frozen=True)
class RunSetup:
    """What every piece of method logic is built from; picklable, identical in every process.

    Attributes:
        scenario: the validated :class:`raysfl.scenario.Scenario`.
        params: the method's parsed ``Params`` dataclass.
        input_shape: (C, H, W) the model sees (after any crop).
        num_classes: M.
        client_indices: per client, its sample indices into the training arrays.
        label_hist: (K, M) per-client label counts over the client's whole local data.
    """

    scenario: Any
    params: Any
    input_shape: tuple[int, int, int]
    num_classes: int
    client_indices: tuple[Any, ...]
    label_hist: Any

    @property
    def num_clients(self) -> int:
        """K."""
        return len(self.client_indices)

    def client_size(self, client: int) -> int:
        """|D_k|."""
        return int(len(self.client_indices[client]))
