"""Lightweight FedSL: client-side dynamic pruning, stochastic gradient quantization, activation dropout.

Zhang, Ni, Wang, "Federated Split Learning with Model Pruning and Gradient Quantization in Wireless Networks"
(specs/lightweight-fedsl.md; docs/algorithms/lightweight_fedsl.md). K clients train the client part of a
split model, one minibatch per round, in lock-step: uplink activation dropout (eq. (3)), server-side update
averaged over clients every round (eq. (7)), client-side Taylor pruning on a cubic schedule (eq. (9)-(10)),
q-bit stochastic quantization of the masked client gradient (eq. (11)-(13)), client-side FedAvg every I rounds
(eq. (14)). ``fedsl`` is the paper's baseline "traditional FedSL": the same method with ρ_f = 0, q = 32
(none), p = 0 and I = 1.

Pieces: :mod:`quantize`, :mod:`pruning`, :mod:`dropout`, :mod:`accounting`, :mod:`latency` (pure functions);
:mod:`client`, :mod:`server`, :mod:`policy` (the engine's three roles).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from raysfl.algorithms.base import AlgorithmSpec, RunSetup
from raysfl.algorithms.common.transforms import train_transform
from raysfl.algorithms.lightweight_fedsl.accounting import FedSLBytes
from raysfl.algorithms.lightweight_fedsl.client import FedSLClient, FedSLClientState
from raysfl.algorithms.lightweight_fedsl.latency import RoundLatency
from raysfl.algorithms.lightweight_fedsl.params import LightweightFedSLParams, TraditionalFedSLParams
from raysfl.algorithms.lightweight_fedsl.policy import FedSLCosts, FedSLPolicy, LatencyLog, Member
from raysfl.algorithms.lightweight_fedsl.server import FedSLServer


def make_client(
    setup: RunSetup, model: Any, train_x: np.ndarray, train_y: np.ndarray, transform: Any
) -> FedSLClient:
    """The pool-side logic."""
    train = setup.scenario.train
    return FedSLClient(
        model.client,
        train_x,
        train_y,
        train_transform(transform),
        setup.params,
        batch_size=train.batch_size,
        weight_decay=train.weight_decay,
        seed=setup.scenario.seed,
        momentum=train.momentum,
    )


def make_server(
    setup: RunSetup, model: Any, test_x: torch.Tensor, test_y: torch.Tensor, seed: int, device: str
) -> FedSLServer:
    """The server-side logic; the dropout masks use the scenario seed (shared with clients and policy)."""
    del seed
    return FedSLServer(setup, model, test_x, test_y, setup.scenario.seed, device)


def make_policy(setup: RunSetup, time: Any, profile: Any, rng: np.random.Generator) -> FedSLPolicy:
    """The coordinator-side round scheduling."""
    return FedSLPolicy(setup, time, FedSLCosts.measure(setup, profile), rng)


def validate(scenario: Any, params: Any) -> list[str]:
    """Both sides step with SGD (eq. (7), (13); the paper has no momentum, so its runs set momentum = 0)."""
    problems = []
    train = scenario.train
    if train.optimizer != "sgd":
        problems.append("train.optimizer: lightweight FedSL updates with SGD (eq. (7), (13)); set 'sgd'")
    if params.prune_rounds and params.prune_rounds > train.global_iterations:
        problems.append(
            "algorithm.params.prune_rounds: the sparsity schedule must end by train.global_iterations "
            f"= {train.global_iterations}"
        )
    return problems


def _spec(name: str, params: type, description: str) -> AlgorithmSpec:
    return AlgorithmSpec(
        name=name,
        params=params,
        description=description,
        family="split",
        source="Zhang, Ni & Wang, Federated Split Learning with Model Pruning and Gradient Quantization in "
        "Wireless Networks; docs/algorithms/lightweight_fedsl.md",
        make_client=make_client,
        make_server=make_server,
        make_policy=make_policy,
        validate=validate,
        smoke=("train.optimizer=sgd", "train.momentum=0.0"),  # SGD as the paper (``validate``)
        per_device_times=True,  # E minibatch steps per job, whatever the client's data
        state_classes=(
            FedSLClient,
            FedSLClientState,
            FedSLServer,
            FedSLPolicy,
            FedSLCosts,
            Member,
            LatencyLog,
            RoundLatency,
            FedSLBytes,
        ),
    )


SPEC = _spec(
    "lightweight_fedsl",
    LightweightFedSLParams,
    "synchronous FedSL with client pruning (|w·g|, cubic ρ_t), q-bit gradient quantization, uplink dropout",
)
BASELINE_SPEC = _spec(
    "fedsl",
    TraditionalFedSLParams,
    "traditional FedSL (lightweight FedSL's baseline): no pruning, quantization or dropout; I = 1",
)

__all__ = [
    "BASELINE_SPEC",
    "SPEC",
    "FedSLClient",
    "FedSLPolicy",
    "FedSLServer",
    "LightweightFedSLParams",
    "TraditionalFedSLParams",
]
