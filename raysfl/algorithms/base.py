"""The algorithm plug-in contract: what a method module must provide to the engine.

An algorithm is a frozen ``Params`` dataclass plus the logic the engine calls; it never imports Ray or the
engine. Each method module ends with ``SPEC = AlgorithmSpec(...)``; ``raysfl/algorithms/__init__.py``
lists the built-in specs in a literal registry, and a method outside raysfl is named by its import path
(``my_package.my_method:SPEC``) or an entry point. The protocols the factories' products satisfy are in
:mod:`raysfl.api`, the public face of this module.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from raysfl.api import ClientFactory, PolicyFactory, ServerFactory
    from raysfl.scenario import Scenario


@dataclass(frozen=True)
class AlgorithmSpec:
    """Registry entry of one method.

    Attributes:
        name: the method's short name (``raysfl list algorithms``, messages).
        params: the frozen dataclass of its ``[algorithm.params]``, declared with ``raysfl.config.option``.
        description: one line for ``raysfl list``.
        family: ``"split"`` or ``"fl"``.
        source: the paper or spec the method follows.
        make_client: ``(setup, model, train_x, train_y, transform) -> ClientLogic``, once per pool.
        make_server: ``(setup, model, test_x, test_y, seed, device) -> ServerLogic``, in the server actor.
        make_policy: ``(setup, time_model, model_profile, rng) -> Policy``, in the coordinator.
        validate: ``(scenario, params) -> problems``, cross-section rules, each naming a field.
        state_classes: see below.
        single_pool: ``params -> None | (reason, instead)``: when the options make every client share state
            in its pool (one optimizer for all), the option that does so and what to use with several pools;
            loading then requires ``engine.pools = 1`` (the scenario check names both).
        train_lr_decay: whether the method applies ``train.lr_decay`` (the full-model FL family's policy
            does); a scenario that sets it for any other method is refused.
        per_device_times: whether a job's emulated time can depend on the device alone
            (``system.compute.training_time = "per-device"``): its jobs take a fixed number of minibatch
            steps, or it charges its passes over the client's data as passes over mean-size data; a scenario
            that asks for per-device times for any other method is refused.
        aux_heads: whether the method may train an auxiliary head on the client activation (``model.aux``;
            its ``validate`` may still require or refuse one for given options); a scenario that sets
            ``model.aux`` for any other method is refused, since the head would be built and never trained.
        smoke: ``dotted.key=value`` overrides a small test run of the method needs beyond the defaults (what
            ``validate`` demands, and sizes that keep it quick); the tests that run every method (checkpoint
            and resume) apply them, so a new method needs no special case there.
        event_columns: the method's own columns of ``events.parquet``, name → ``"int64"``, ``"float64"``,
            ``"string"`` or ``"bool"``, after the engine's (:data:`raysfl.metrics.columns.ENGINE_COLUMNS`); a
            ``Log`` row with a column neither declares, or a value of another type, is a policy error.
    """

    name: str
    params: type
    description: str
    family: str  # "split" or "fl"
    source: str  # the spec / paper the method follows
    make_client: ClientFactory | None = None
    make_server: ServerFactory | None = None
    make_policy: PolicyFactory | None = None
    validate: Callable[[Any, Any], list[str]] | None = None
    # every class (besides ``params`` and the engine's own) whose instances the policy, client logic, client
    # states or server logic keep between calls: the only classes a checkpoint may recreate
    # (``raysfl.engine.snapshot.state_classes``); one missing here makes checkpointing fail, naming it
    state_classes: tuple[type, ...] = ()
    single_pool: Callable[[Any], tuple[str, str] | None] | None = None
    train_lr_decay: bool = False
    per_device_times: bool = False
    aux_heads: bool = False
    smoke: tuple[str, ...] = ()
    event_columns: Mapping[str, str] = field(default_factory=dict)


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

    scenario: Scenario
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

    @functools.cached_property
    def mean_client_size(self) -> float:
        """mean_k |D_k|, computed once."""
        return sum(len(ix) for ix in self.client_indices) / max(self.num_clients, 1)
