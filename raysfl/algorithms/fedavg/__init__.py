"""FedAvg: synchronous federated averaging on the full model (McMahan et al. 2017; GAS spec §10.10)."""

from raysfl.algorithms.common.fl_spec import fl_spec
from raysfl.algorithms.fedavg.params import FedAvgParams
from raysfl.algorithms.fedavg.server import FedAvgServer, aggregate_round

SPEC = fl_spec(
    name="fedavg",
    params=FedAvgParams,
    server=FedAvgServer,
    description="synchronous FL: C of K clients per round train the full model, |D_k|-weighted average",
    source="McMahan et al. 2017; docs/algorithms/fedavg.md",
    per_update=lambda setup: setup.scenario.federation.active_clients,  # one round of C jobs
    synchronous=True,
    optimizer_state=True,
)

__all__ = ["SPEC", "FedAvgParams", "FedAvgServer", "aggregate_round"]
