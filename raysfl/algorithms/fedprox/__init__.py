"""FedProx: FedAvg with a proximal local objective (Li et al., MLSys 2020)."""

from typing import Any

from raysfl.algorithms.common.fl_spec import fl_spec
from raysfl.algorithms.fedprox.params import FedProxParams, straggler_count
from raysfl.algorithms.fedprox.policy import FedProxPolicy
from raysfl.algorithms.fedprox.server import FedProxServer


def validate(scenario: Any, params: FedProxParams) -> list[str]:
    """Dropping stragglers must leave a device in each round (FedAvg's comparison in Sec. 5)."""
    active = scenario.federation.active_clients
    dropped = straggler_count(params.straggler_fraction, active)
    if params.drop_stragglers and dropped >= active:
        return [
            f"algorithm.params.straggler_fraction: round({params.straggler_fraction:g}·C) = {dropped} "
            f"stragglers of C = {active} (federation.active_clients) are all dropped "
            "(algorithm.params.drop_stragglers = true), which leaves no device in a round; use a fraction "
            f"below {(active - 0.5) / active:.3g}, or keep the stragglers"
        ]
    return []


SPEC = fl_spec(
    name="fedprox",
    params=FedProxParams,
    server=FedProxServer,  # FedAvg's round average (Algorithm 2, line 9); smaller rounds if stragglers drop
    description="synchronous FL: FedAvg rounds, local objective F_k(w) + μ/2·‖w − w^t‖²",
    source="Li et al., MLSys 2020, Federated Optimization in Heterogeneous Networks; "
    "docs/algorithms/fedprox.md",
    per_update=lambda setup: setup.scenario.federation.active_clients,  # one round of C jobs
    synchronous=True,
    proximal=lambda setup: setup.params.mu,
    policy=FedProxPolicy,  # stragglers with partial work (Sec. 5); none by default
    policy_options=lambda setup: {
        "straggler_fraction": setup.params.straggler_fraction,
        "straggler_work": setup.params.straggler_work,
        "drop_stragglers": setup.params.drop_stragglers,
    },
    validate=validate,
)

__all__ = ["SPEC", "FedProxParams", "FedProxPolicy", "FedProxServer", "straggler_count"]
