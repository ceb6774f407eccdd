"""MiniBatch-SFL: synchronous split FL, the server steps on all C clients' concatenated activations.

A baseline of GAS (specs/gas.md §8.1 "Baselines", §10.2 timing, §10.10 reference code); docs in
``docs/algorithms/minibatch_sfl.md``. The pieces (client, server, policy) are written for several cuts and
groups so that S2FL (``raysfl.algorithms.s2fl``) reuses them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from raysfl.algorithms.base import AlgorithmSpec, RunSetup
from raysfl.algorithms.common.batching import BatchCursor
from raysfl.algorithms.common.costs import SplitCosts
from raysfl.algorithms.common.split_client import SplitClientState
from raysfl.algorithms.common.transforms import train_transform
from raysfl.algorithms.minibatch_sfl.client import SyncSplitClient
from raysfl.algorithms.minibatch_sfl.layers import scenario_split
from raysfl.algorithms.minibatch_sfl.params import MiniBatchSFLParams
from raysfl.algorithms.minibatch_sfl.policy import Member, SyncSplitPolicy
from raysfl.algorithms.minibatch_sfl.server import SyncSplitServer

SYNC_SPLIT_STATE_CLASSES: tuple[type, ...] = (
    SyncSplitClient, SplitClientState, BatchCursor, SyncSplitServer, SyncSplitPolicy, Member, SplitCosts,
)  # fmt: skip
"""The state classes of MiniBatch-SFL, which S2FL shares (client, server, policy and their parts)."""


def make_client(
    setup: RunSetup, model: Any, train_x: np.ndarray, train_y: np.ndarray, transform: Any
) -> SyncSplitClient:
    """The pool-side logic: a split-learning client at the scenario's cut."""
    return SyncSplitClient(
        model,
        {scenario_split(setup.scenario): len(model.client)},
        train_x,
        train_y,
        train_transform(transform),
        setup.scenario.train,
        shared_optimizer_state=setup.params.optimizer_state == "shared",
    )


def make_server(
    setup: RunSetup, model: Any, test_x: torch.Tensor, test_y: torch.Tensor, seed: int, device: str
) -> SyncSplitServer:
    """The server-side logic: one server model stepped on the concatenation of all C activations."""
    del seed  # nothing random on the server
    cuts = {scenario_split(setup.scenario): len(model.client)}
    return SyncSplitServer(model, cuts, setup.scenario.train, test_x, test_y, device=device)


def make_policy(setup: RunSetup, time: Any, profile: Any, rng: np.random.Generator) -> SyncSplitPolicy:
    """The coordinator-side round and barrier scheduling."""
    split = scenario_split(setup.scenario)
    return SyncSplitPolicy(setup, time, {split: SplitCosts.from_profile(profile)}, rng, split)


def single_pool(params: Any) -> tuple[str, str] | None:
    """The code's shared client momentum (one buffer for all clients) needs every client in one pool."""
    if params.optimizer_state != "shared":
        return None
    return (
        "algorithm.params.optimizer_state: 'shared' (one client momentum buffer for all clients, as in "
        "the reference code)",
        "use 'per-round' with several pools",
    )


SPEC = AlgorithmSpec(
    name="minibatch_sfl",
    params=MiniBatchSFLParams,
    description="synchronous split FL: per-iteration barrier, one server step on all C activations",
    family="split",
    source="a baseline of GAS (Yang & Liu, §8.1); docs/algorithms/minibatch_sfl.md",
    make_client=make_client,
    make_server=make_server,
    make_policy=make_policy,
    single_pool=single_pool,
    state_classes=SYNC_SPLIT_STATE_CLASSES,
)

__all__ = ["SPEC", "MiniBatchSFLParams", "SyncSplitClient", "SyncSplitPolicy", "SyncSplitServer"]
