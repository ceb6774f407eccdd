"""One builder for the registry entries of the full-model FL methods.

FedAvg, FedAsync, FedBuff, CA2FL, FedProx, MOON, FedDyn, FedLWS, PORT, ASO-Fed and FedSA.

They share the client (:class:`FLClient`) and the policy (:class:`FLPolicy`); they differ in their server
rule, in how many arrivals make one global iteration, in whether rounds are synchronous, and in the few
hooks below (a local objective, policy options).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from raysfl.algorithms.base import AlgorithmSpec, RunSetup
from raysfl.algorithms.common.batching import BatchCursor
from raysfl.algorithms.common.fl_client import FLClient, FLClientState
from raysfl.algorithms.common.fl_policy import FLCosts, FLJob, FLPolicy
from raysfl.algorithms.common.fl_server import Arrival
from raysfl.algorithms.common.optim import shared_optimizer_single_pool
from raysfl.algorithms.common.transforms import train_transform

FL_STATE_CLASSES: tuple[type, ...] = (FLClient, FLClientState, BatchCursor, FLPolicy, FLJob, FLCosts, Arrival)
"""The state classes every full-model FL method shares (client, policy and their parts)."""


def fl_spec(
    *,
    name: str,
    params: type,
    server: type,
    description: str,
    source: str,
    per_update: Callable[[RunSetup], int],
    synchronous: bool = False,
    proximal: Callable[[RunSetup], float] = lambda setup: 0.0,
    objective: Callable[[RunSetup, Any], Any] | None = None,
    policy_options: Callable[[RunSetup], dict[str, Any]] = lambda setup: {},
    policy: type[FLPolicy] = FLPolicy,
    state_classes: tuple[type, ...] = (),
    validate: Callable[[Any, Any], list[str]] | None = None,
    optimizer_state: bool = False,
) -> AlgorithmSpec:
    """The :class:`AlgorithmSpec` of a full-model FL method.

    Args:
        name: registry name.
        params: the method's ``Params`` dataclass.
        server: the server-logic class, constructed as ``server(setup, model, test_x, test_y, device=...)``.
        description: one line for ``raysfl list``.
        source: paper / spec reference.
        per_update: arrivals per global iteration (FedAsync 1, FedBuff/CA2FL K_buf, FedAvg C).
        synchronous: rounds with a barrier (FedAvg) instead of C concurrent jobs.
        proximal: ρ of a proximal local objective (FedAsync, FedProx, ASO-Fed); 0 = plain local SGD.
        objective: ``(setup, full_model) -> LocalObjective`` replacing the local loss (MOON, FedDyn).
        policy_options: extra keyword arguments of :class:`FLPolicy` (staleness threshold, bound, ...).
        policy: the policy class, :class:`FLPolicy` or a subclass (ASO-Fed's step size, FedProx's stragglers).
        state_classes: the method's own state classes besides ``server`` and ``policy`` (its objective's
            class); the family's shared ones (:data:`FL_STATE_CLASSES`) are added here.
        validate: ``(scenario, params) -> problems``, the method's cross-section rules.
        optimizer_state: the method's params have the ``optimizer_state`` option
            (:func:`~raysfl.algorithms.common.optim.optimizer_state_option`): ``"shared"`` carries the
            optimizer state from job to job in one pool, asynchronous jobs trained when due.
    """

    def shared(setup: RunSetup) -> bool:
        return optimizer_state and setup.params.optimizer_state == "shared"

    def make_client(
        setup: RunSetup, model: Any, train_x: np.ndarray, train_y: np.ndarray, transform: Any
    ) -> FLClient:
        full = model.full()
        return FLClient(
            full,
            train_x,
            train_y,
            train_transform(transform),
            setup.scenario.train,
            proximal=proximal(setup),
            objective=None if objective is None else objective(setup, full),
            shared_optimizer_state=shared(setup),
        )

    def make_server(setup: RunSetup, model: Any, test_x: Any, test_y: Any, seed: int, device: str) -> Any:
        return server(setup, model, test_x, test_y, device=device)

    def make_policy(setup: RunSetup, time: Any, profile: Any, rng: np.random.Generator) -> FLPolicy:
        kwargs: dict[str, Any] = (
            {"synchronous": True} if synchronous else {"replacement": setup.params.replacement}
        )
        if shared(setup) and not synchronous:
            kwargs["train_when_due"] = True  # the jobs pass the shared buffer on in the order they finish
        kwargs.update(policy_options(setup))
        return policy(setup, time, FLCosts.from_profile(profile), rng, per_update=per_update(setup), **kwargs)

    return AlgorithmSpec(
        name=name,
        params=params,
        description=description,
        family="fl",
        source=source,
        make_client=make_client,
        make_server=make_server,
        make_policy=make_policy,
        validate=validate,
        single_pool=shared_optimizer_single_pool if optimizer_state else None,
        state_classes=(*FL_STATE_CLASSES, server, policy, *state_classes),
        train_lr_decay=True,
        per_device_times=True,  # E minibatch steps per job, whatever the client's data
    )
