"""FedLWS: federated learning with adaptive layer-wise weight shrinking (Shi et al., ICLR 2025)."""

from raysfl.algorithms.common.fl_spec import fl_spec
from raysfl.algorithms.fedlws.params import FedLWSParams
from raysfl.algorithms.fedlws.server import FedLWSServer, fedlws_step, layer_groups, shrink_factors

SPEC = fl_spec(
    name="fedlws",
    params=FedLWSParams,
    server=FedLWSServer,
    description="synchronous FL: FedAvg rounds, then each layer of the average shrunk by γ_l ≤ 1",
    source="Shi et al., ICLR 2025, FedLWS: Adaptive Layer-wise Weight Shrinking; docs/algorithms/fedlws.md",
    per_update=lambda setup: setup.scenario.federation.active_clients,  # one round of C jobs
    synchronous=True,
)

__all__ = ["SPEC", "FedLWSParams", "FedLWSServer", "fedlws_step", "layer_groups", "shrink_factors"]
