"""Glue shared by the four FSL methods: the engine's factories for a given :class:`FSLRules`.

Each registry entry of the CSE-FSL family (``cse_fsl``, ``fsl_an``, ``splitfed_v1``, ``splitfed_v2``, all in
:mod:`raysfl.algorithms.cse_fsl`) maps its ``Params`` to an :class:`FSLRules` preset and calls these from its
``make_client`` / ``make_server`` / ``make_policy`` / ``validate``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from raysfl.algorithms.base import AlgorithmSpec, RunSetup
from raysfl.algorithms.common.aux_client import AuxClient, AuxClientState
from raysfl.algorithms.common.batching import BatchCursor
from raysfl.algorithms.common.fsl_accounting import RoundBytes
from raysfl.algorithms.common.fsl_policy import ClientRound, FSLCosts, FSLPolicy
from raysfl.algorithms.common.fsl_round import EpochCursor, FSLRules
from raysfl.algorithms.common.fsl_server import FSLServer, ServerCopy
from raysfl.algorithms.common.fsl_split_client import FSLSplitClient
from raysfl.algorithms.common.split_client import SplitClientState

FSL_STATE_CLASSES: tuple[type, ...] = (
    AuxClient, AuxClientState, FSLSplitClient, SplitClientState, BatchCursor, EpochCursor,
    FSLServer, ServerCopy, FSLPolicy, ClientRound, FSLCosts, FSLRules, RoundBytes,
)  # fmt: skip
"""The state classes of the four FSL methods (both client kinds, the server, the policy, their parts)."""


def build_client(
    rules: FSLRules, setup: RunSetup, model: Any, train_x: np.ndarray, train_y: np.ndarray, transform: Any
) -> AuxClient | FSLSplitClient:
    """The pool-side logic: :class:`AuxClient` (local loss) or :class:`FSLSplitClient` (gradients)."""

    def tf(x: np.ndarray, gen: torch.Generator) -> torch.Tensor:
        return transform.train(torch.from_numpy(np.ascontiguousarray(x)), gen)

    train = setup.scenario.train
    if rules.local_loss:
        return AuxClient(
            model.client,
            model.aux,
            train_x,
            train_y,
            tf,
            train,
            drop_last=rules.drop_last,
            recompute_after_update=rules.recompute_after_update,
            max_grad_norm=rules.max_grad_norm,
        )
    clipped = dataclasses.replace(train, clip_grad_norm=rules.max_grad_norm or train.clip_grad_norm)
    return FSLSplitClient(model.client, train_x, train_y, tf, clipped, drop_last=rules.drop_last)


def build_server(
    rules: FSLRules,
    setup: RunSetup,
    model: Any,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
    seed: int,
    device: str,
) -> FSLServer:
    """The server-side logic."""
    return FSLServer(setup, rules, model, test_x, test_y, seed=seed, device=device)


def build_policy(
    rules: FSLRules, setup: RunSetup, time: Any, profile: Any, rng: np.random.Generator
) -> FSLPolicy:
    """The coordinator-side scheduling."""
    return FSLPolicy(setup, rules, time, FSLCosts.measure(setup, profile, rules.local_loss), rng)


def validate_aux(scenario: Any, rules: FSLRules) -> list[str]:
    """Local-loss methods need ``model.aux``; gradient methods must not have one."""
    name = rules.method
    if rules.local_loss and not scenario.model.aux:
        return [
            f"model.aux: {name} trains the client through an auxiliary head; set model.aux "
            "(e.g. 'mlp'; `raysfl describe model NAME` lists the model's heads)"
        ]
    if not rules.local_loss and scenario.model.aux:
        return [f"model.aux: {name} has no auxiliary head (the server returns gradients); set model.aux = ''"]
    return []


def fsl_spec(
    *,
    name: str,
    params: type,
    rules: Callable[[Any], FSLRules],
    description: str,
    smoke: tuple[str, ...] = (),
) -> AlgorithmSpec:
    """The registry entry of one of the four methods, given how its ``Params`` map to :class:`FSLRules`."""

    def make_client(
        setup: RunSetup, model: Any, train_x: np.ndarray, train_y: np.ndarray, transform: Any
    ) -> Any:
        return build_client(rules(setup.params), setup, model, train_x, train_y, transform)

    def make_server(
        setup: RunSetup, model: Any, test_x: Any, test_y: Any, seed: int, device: str
    ) -> FSLServer:
        return build_server(rules(setup.params), setup, model, test_x, test_y, seed, device)

    def make_policy(setup: RunSetup, time: Any, profile: Any, rng: np.random.Generator) -> FSLPolicy:
        return build_policy(rules(setup.params), setup, time, profile, rng)

    def validate(scenario: Any, p: Any) -> list[str]:
        return validate_aux(scenario, rules(p))

    return AlgorithmSpec(
        name=name,
        params=params,
        description=description,
        family="split",
        source="Mu & Shen, Federated Split Learning with Improved Communication and Storage Efficiency; "
        "docs/algorithms/cse_fsl.md",
        make_client=make_client,
        make_server=make_server,
        make_policy=make_policy,
        validate=validate,  # which of the four needs model.aux and which refuses it (validate_aux)
        aux_heads=True,
        state_classes=FSL_STATE_CLASSES,
        smoke=smoke,
    )
