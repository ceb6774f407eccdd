"""FedSA: staleness-aware semi-asynchronous FL for non-IID data (Chen, Mao & Ma, FGCS 2021)."""

from functools import partial
from typing import Any

from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.common.fl_spec import fl_spec
from raysfl.algorithms.fedsa.params import FedSAParams
from raysfl.algorithms.fedsa.server import FedSAServer, frequency_lr_scale


def _policy_options(setup: RunSetup) -> dict[str, Any]:
    """τ₀ drops stale arrivals in the policy's count too; ``job_lr`` sends η_i/η with every job."""
    p = setup.params
    options: dict[str, Any] = {"discard_above": p.tau0}
    if p.lr_scaling == "frequency":
        options["job_lr"] = partial(frequency_lr_scale, cap=p.lr_scale_max)
    return options


SPEC = fl_spec(
    name="fedsa",
    params=FedSAParams,
    server=FedSAServer,
    description="semi-async FL: average the first M accepted models, drop staler than τ₀, scaled η_i",
    source="Chen, Mao & Ma, FGCS 117 (2021), FedSA; docs/algorithms/fedsa.md",
    per_update=lambda setup: setup.params.buffer_size,  # M accepted arrivals per global iteration
    policy_options=_policy_options,
)

__all__ = ["SPEC", "FedSAParams", "FedSAServer", "frequency_lr_scale"]
