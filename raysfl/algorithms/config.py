"""Scenario sections shared by every algorithm: the federation's size and the training budget."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from raysfl.config import option


@dataclass(frozen=True)
class FederationConfig:
    """Who takes part: K registered clients, C of them active (training) at any time."""

    num_clients: int = option(20, ge=1, le=1_000_000, doc="K, registered clients [P] GAS §8.1")
    active_clients: int = option(10, ge=1, le=1_000_000, doc="C, clients training concurrently [P] GAS §8.1")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation and budget settings common to all methods."""

    global_iterations: int = option(
        1000, ge=1, doc="T: client-model aggregations (GAS) or rounds (FedAvg) before the run stops"
    )
    local_iterations: int = option(20, ge=1, doc="E: local iterations (minibatches) per client job [P]")
    batch_size: int = option(32, ge=1, doc="B: minibatch size per client [P]")
    optimizer: str = option("sgd", choices=("sgd", "adam"), doc="optimizer on both sides [P] GAS App. E")
    lr: float = option(0.01, gt=0, doc="learning rate η [P]")
    lr_decay: float = option(
        1.0,
        gt=0,
        le=1,
        doc="full-model FL methods: a job's η is lr·lr_decay^j, j = rounds so far (synchronous) or completed "
        "groups of C accepted arrivals (asynchronous), FedASMU's schedule for every method (§6.1.4) [A]; "
        "1 = constant",
    )
    momentum: float = option(
        0.9, ge=0, lt=1, doc="SGD momentum [P] GAS App. E", applies={"optimizer": ("sgd",)}
    )
    weight_decay: float = option(5e-4, ge=0, doc="L2 weight decay [P] GAS App. E")
    clip_grad_norm: float = option(0.0, ge=0, doc="max gradient norm, 0 = off; GAS code clips at 10 [C]")
    eval_every: int = option(
        1,
        ge=1,
        doc="evaluate every this many global iterations [C] GAS §10.12",
        applies={"eval_every_s": (0.0,)},
    )
    eval_every_s: float = option(
        0.0,
        ge=0,
        doc="when > 0, replaces eval_every: evaluate after the first global iteration that ends in each new"
        " interval of this many emulated seconds (an equal time grid for every method, for time-to-target"
        " comparisons of methods whose iterations last differently long) [A]; 0 = off",
    )
    eval_batch_size: int = option(
        512,
        ge=1,
        doc="test-set batch size: the loss is summed per batch (results change at float32 rounding only); "
        "on the CPU each batch's forward runs at most 64 rows at a time (common/evaluate.py)",
    )
    max_emulated_s: float = option(0.0, ge=0, doc="stop after this much emulated time, 0 = no limit")


@dataclass(frozen=True)
class AlgorithmConfig:
    """Which method runs; ``params`` is parsed into that method's own ``Params`` dataclass."""

    name: str = option("gas", doc="method name from the algorithm registry (`raysfl list`)")
    params: dict[str, Any] = field(default_factory=dict)
