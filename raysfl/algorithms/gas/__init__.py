"""GAS: generative activation-aided asynchronous split federated learning (specs/gas.md)."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import torch

from raysfl.algorithms.base import AlgorithmSpec, RunSetup
from raysfl.algorithms.common.batching import BatchCursor
from raysfl.algorithms.common.costs import SplitCosts
from raysfl.algorithms.common.optim import shared_optimizer_single_pool
from raysfl.algorithms.common.split_client import SplitClient, SplitClientState
from raysfl.algorithms.common.transforms import train_transform
from raysfl.algorithms.gas.dissimilarity import GradientDissimilarity
from raysfl.algorithms.gas.generate import GaussianSampler
from raysfl.algorithms.gas.lowrank import LowRankSampler
from raysfl.algorithms.gas.params import GASParams
from raysfl.algorithms.gas.policy import GASPolicy, Job
from raysfl.algorithms.gas.server import GASServer
from raysfl.algorithms.gas.stats import LabelGaussians


def make_client(
    setup: RunSetup, model: Any, train_x: np.ndarray, train_y: np.ndarray, transform: Any
) -> SplitClient:
    """The pool-side logic: a split-learning client (GAS Algorithm 2)."""
    return SplitClient(
        model.client,
        train_x,
        train_y,
        train_transform(transform),
        setup.scenario.train,
        shared_optimizer_state=setup.params.optimizer_state == "shared",
    )


def make_server(
    setup: RunSetup, model: Any, test_x: torch.Tensor, test_y: torch.Tensor, seed: int, device: str
) -> GASServer:
    """The server-side logic (GAS Algorithm 1)."""
    return GASServer(setup, model.client, model.server, test_x, test_y, seed=seed, device=device)


FULL_COVARIANCE_WARN_BYTES = 8 << 30
"""Full covariances (and their factors) larger than this are named in a warning before the run starts."""


def full_covariance_bytes(params: GASParams, num_classes: int, activation_numel: int) -> int:
    """Bytes of eqs. (11)-(12)'s full covariances on the server (0 with ``covariance = "diagonal"``).

    M float32 d×d matrices, and as much again for the sampler's cached Cholesky factors.
    """
    if params.covariance != "full" or not params.generate:
        return 0
    return 2 * num_classes * activation_numel**2 * 4


def warn_of_large_covariances(params: GASParams, num_classes: int, activation_numel: int) -> None:
    """Warn when the server's full covariances would be large (:func:`full_covariance_bytes`).

    They are allocated at the first activation, in the server, and would fail there (ViT after its first
    block: d = 33,280, 82.5 GiB).
    """
    held = full_covariance_bytes(params, num_classes, activation_numel)
    if held > FULL_COVARIANCE_WARN_BYTES:
        warnings.warn(
            f"algorithm.params.covariance = 'full' at d = {activation_numel:,} (the split's activation) "
            f"keeps {num_classes} covariances of {activation_numel:,}² float32 values and their factors on "
            f"the server: up to {held / 2**30:.1f} GiB. covariance = 'diagonal' keeps "
            f"{2 * num_classes * activation_numel * 8 / 2**20:.1f} MiB",
            stacklevel=3,
        )


def make_policy(setup: RunSetup, time: Any, profile: Any, rng: np.random.Generator) -> GASPolicy:
    """The coordinator-side scheduling of GAS (after :func:`warn_of_large_covariances`)."""
    warn_of_large_covariances(setup.params, setup.num_classes, profile.activation_numel)
    return GASPolicy(setup, time, SplitCosts.from_profile(profile), rng)


def largest_log_weight(params: GASParams, n_max: int) -> float:
    """The logarithm of the largest single weight s(n), n ≤ ``n_max``, of GAS §5's weighting."""
    log_a, n = math.log(params.weight_a), max(n_max, 1)
    if params.weighting == "exponential":
        return log_a + max(params.weight_b, 0.0) * n
    if params.weighting == "polynomial":
        return log_a + max(params.weight_b, 0.0) * math.log(n)
    return log_a + math.log(n)


def validate(scenario: Any, params: GASParams) -> list[str]:
    """s(n) must stay finite in the statistics' type up to the last progress n = T·E (paper progress).

    Without generation (``generate = false``) the statistics are never kept, so s(n) is never used.

    The statistics of full covariances are float32 (at most about e^88.7), diagonal ones float64 (e^709.8).
    The code's progress counters have no such bound at load time; :func:`raysfl.algorithms.gas.stats.
    weight_overflow` stops such a run when a total weight passes the limit.
    """
    if params.progress != "paper" or not params.generate:  # without generation, s(n) weighs nothing
        return []
    n_max = scenario.train.global_iterations * scenario.train.local_iterations
    dtype = torch.float32 if params.covariance == "full" else torch.float64
    limit = math.log(torch.finfo(dtype).max)
    largest = largest_log_weight(params, n_max)
    if largest <= limit:
        return []
    return [
        f"algorithm.params.weight_b: s(n) = {params.weight_a:g}·"
        + ("e^(b·n)" if params.weighting == "exponential" else "n^b")
        + f" with b = {params.weight_b:g} reaches e^{largest:.1f} at n = T·E = "
        f"{n_max}, beyond the {str(dtype).removeprefix('torch.')} statistics of covariance = "
        f"{params.covariance!r} (at most e^{limit:.1f}); lower weight_b, or use weighting = 'linear'"
    ]


SPEC = AlgorithmSpec(
    name="gas",
    params=GASParams,
    description="async split FL with activation/model buffers and per-label generated activations",
    family="split",
    source="Yang & Liu, GAS: Generative Activation-Aided Asynchronous Split Federated Learning; "
    "docs/algorithms/gas.md",
    make_client=make_client,
    make_server=make_server,
    make_policy=make_policy,
    validate=validate,
    single_pool=shared_optimizer_single_pool,
    per_device_times=True,  # E minibatch steps per job, whatever the client's data
    smoke=("algorithm.params.q_s=3", "algorithm.params.q_c=3", 'algorithm.params.covariance="diagonal"'),
    state_classes=(
        SplitClient,
        SplitClientState,
        BatchCursor,
        GASServer,
        GradientDissimilarity,
        LabelGaussians,
        GaussianSampler,
        LowRankSampler,
        GASPolicy,
        Job,
        SplitCosts,
    ),
)

__all__ = ["SPEC", "GASParams", "GASPolicy", "GASServer"]
