"""S2FL: MiniBatch-SFL plus adaptive model splitting and label-balanced activation grouping.

A baseline of GAS (specs/gas.md §8.1 "Baselines", §10.10 reference code); docs in ``docs/algorithms/s2fl.md``.
Client, server and barrier come from :mod:`raysfl.algorithms.minibatch_sfl`; this package adds the per-round
split choice and grouping (:class:`S2FLPolicy`) and trains each client at its chosen cut.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from raysfl.algorithms.base import AlgorithmSpec, RunSetup
from raysfl.algorithms.common.costs import SplitCosts
from raysfl.algorithms.common.transforms import train_transform
from raysfl.algorithms.minibatch_sfl import SYNC_SPLIT_STATE_CLASSES, single_pool
from raysfl.algorithms.minibatch_sfl.client import SyncSplitClient
from raysfl.algorithms.minibatch_sfl.layers import scenario_split, split_layer_counts, split_profiles
from raysfl.algorithms.minibatch_sfl.server import SyncSplitServer
from raysfl.algorithms.s2fl.params import S2FLParams
from raysfl.algorithms.s2fl.policy import S2FLPolicy
from raysfl.models.zoo import MODELS


def candidate_splits(scenario: Any, params: S2FLParams) -> list[str]:
    """The candidate splits: ``params.candidates``, or the model's splits up to the scenario's split.

    For the GAS AlexNet at its default L2 that is [L1, L2], the two candidates of the code [C].
    """
    if params.candidates:
        return list(params.candidates)
    splits = MODELS[scenario.model.name].splits
    return list(splits[: splits.index(scenario_split(scenario)) + 1])


def _trained_cuts(setup: RunSetup, model: Any) -> dict[str, int]:
    """The cuts clients train at: every candidate (``trained``), or only the scenario's split (``code``)."""
    if setup.params.split_mode == "trained":
        return split_layer_counts(setup, candidate_splits(setup.scenario, setup.params))
    return {scenario_split(setup.scenario): len(model.client)}


def make_client(
    setup: RunSetup, model: Any, train_x: np.ndarray, train_y: np.ndarray, transform: Any
) -> SyncSplitClient:
    """The pool-side logic: a split-learning client for every cut it may be given."""
    return SyncSplitClient(
        model,
        _trained_cuts(setup, model),
        train_x,
        train_y,
        train_transform(transform),
        setup.scenario.train,
        shared_optimizer_state=setup.params.optimizer_state == "shared",
    )


def make_server(
    setup: RunSetup, model: Any, test_x: torch.Tensor, test_y: torch.Tensor, seed: int, device: str
) -> SyncSplitServer:
    """The server-side logic: one full layer stack, grouped server steps, layer-wise aggregation."""
    del seed  # nothing random on the server
    return SyncSplitServer(
        model,
        _trained_cuts(setup, model),
        setup.scenario.train,
        test_x,
        test_y,
        device=device,
        group_momentum=setup.params.group_momentum,
    )


def make_policy(setup: RunSetup, time: Any, profile: Any, rng: np.random.Generator) -> S2FLPolicy:
    """The coordinator-side scheduling, with each candidate split's measured FLOPs and bytes."""
    default = scenario_split(setup.scenario)
    candidates = candidate_splits(setup.scenario, setup.params)
    others = [s for s in candidates if s != default]
    costs = {s: SplitCosts.from_profile(p) for s, p in split_profiles(setup, others).items()}
    costs[default] = SplitCosts.from_profile(profile)
    layers = split_layer_counts(setup, candidates)
    return S2FLPolicy(setup, time, costs, rng, default, candidates, layers)


def validate(scenario: Any, params: S2FLParams) -> list[str]:
    """Candidates must be splits of the model, at most C groups (the pool rule is ``single_pool``)."""
    problems: list[str] = []
    if params.groups > scenario.federation.active_clients:
        problems.append(
            f"algorithm.params.groups: {params.groups} groups exceed the "
            f"{scenario.federation.active_clients} clients of a round (federation.active_clients)"
        )
    entry = MODELS.get(scenario.model.name)
    if entry is not None:
        bad = [s for s in params.candidates if s not in entry.splits]
        if bad:
            problems.append(
                f"algorithm.params.candidates: {', '.join(map(repr, bad))} not a split of {entry.name}; "
                f"choose among {', '.join(map(repr, entry.splits))}"
            )
        if len(set(params.candidates)) != len(params.candidates):
            problems.append("algorithm.params.candidates: a split is listed twice")
    return problems


SPEC = AlgorithmSpec(
    name="s2fl",
    params=S2FLParams,
    description="MiniBatch-SFL plus median-time adaptive model splitting and label-balanced groups",
    family="split",
    source="a baseline of GAS (Yang & Liu, §8.1); docs/algorithms/s2fl.md",
    make_client=make_client,
    make_server=make_server,
    make_policy=make_policy,
    validate=validate,
    single_pool=single_pool,
    state_classes=(*SYNC_SPLIT_STATE_CLASSES, S2FLPolicy),
)

__all__ = ["SPEC", "S2FLParams", "S2FLPolicy", "candidate_splits"]
