"""The registry entries of FedASMU and FedSSMU: one client, server and policy, two schedules."""

from __future__ import annotations

from typing import Any

import numpy as np

from raysfl.algorithms.base import AlgorithmSpec, RunSetup
from raysfl.algorithms.common.batching import BatchCursor
from raysfl.algorithms.common.fl_policy import FLCosts
from raysfl.algorithms.common.fl_server import Arrival
from raysfl.algorithms.common.transforms import train_transform
from raysfl.algorithms.fedasmu.client import MUClient, MUClientState
from raysfl.algorithms.fedasmu.control import AggregationRecord, ServerControls
from raysfl.algorithms.fedasmu.policy import MUJob, MUPolicy
from raysfl.algorithms.fedasmu.server import MUServer
from raysfl.algorithms.fedasmu.slots import MetaPolicy

MU_STATE_CLASSES: tuple[type, ...] = (
    MUClient, MUClientState, BatchCursor, MUServer, Arrival, ServerControls, AggregationRecord, MetaPolicy,
    MUPolicy, MUJob, FLCosts,
)  # fmt: skip
"""The state classes of FedASMU and FedSSMU (client, server with its controls, policy, their parts)."""


def validate(scenario: Any, params: Any) -> list[str]:
    """Local training is split into several calls, so it must not carry optimizer state between them."""
    train = scenario.train
    if train.optimizer != "sgd" or train.momentum != 0.0:
        return [
            "train.optimizer/train.momentum: FedASMU and FedSSMU train with plain SGD (Eq. 6, spec §3.4 "
            "[A]); set train.optimizer = 'sgd' and train.momentum = 0"
        ]
    return []


def mu_spec(*, name: str, params: type, synchronous: bool, description: str) -> AlgorithmSpec:
    """The :class:`AlgorithmSpec` of FedASMU (``synchronous = False``) or FedSSMU (``True``)."""

    def make_client(
        setup: RunSetup, model: Any, train_x: np.ndarray, train_y: np.ndarray, transform: Any
    ) -> MUClient:
        return MUClient(
            model.full(),
            train_x,
            train_y,
            train_transform(transform),
            setup.scenario.train,
            params=setup.params,
        )

    def make_server(
        setup: RunSetup, model: Any, test_x: Any, test_y: Any, seed: int, device: str
    ) -> MUServer:
        return MUServer(setup, model, test_x, test_y, device=device, seed=seed, synchronous=synchronous)

    def make_policy(setup: RunSetup, time: Any, profile: Any, rng: np.random.Generator) -> MUPolicy:
        return MUPolicy(setup, time, FLCosts.from_profile(profile), rng, synchronous)

    return AlgorithmSpec(
        name=name,
        params=params,
        description=description,
        family="fl",
        source=f"Jia, Liu et al., Efficient FL with Timely Update Dissemination; docs/algorithms/{name}.md",
        make_client=make_client,
        make_server=make_server,
        make_policy=make_policy,
        validate=validate,
        state_classes=MU_STATE_CLASSES,
        per_device_times=True,  # epochs charged as passes over mean-size data (MUPolicy.epoch_times)
        smoke=("train.optimizer=sgd", "train.momentum=0.0"),  # plain SGD (``validate``)
    )
