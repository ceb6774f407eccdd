"""FedDyn: federated learning with dynamic regularisation (Acar et al., ICLR 2021)."""

from raysfl.algorithms.common.fl_spec import fl_spec
from raysfl.algorithms.feddyn.objective import FedDynObjective
from raysfl.algorithms.feddyn.params import FedDynParams
from raysfl.algorithms.feddyn.server import FedDynServer, feddyn_step

SPEC = fl_spec(
    name="feddyn",
    params=FedDynParams,
    server=FedDynServer,
    description="synchronous FL: per-device linear + quadratic regulariser, server state h corrects the mean",
    source="Acar et al., ICLR 2021, FedDyn (dynamic regularization); docs/algorithms/feddyn.md",
    per_update=lambda setup: setup.scenario.federation.active_clients,  # one round of C jobs
    synchronous=True,
    objective=lambda setup, model: FedDynObjective(setup.params.alpha),
    state_classes=(FedDynObjective,),
)

__all__ = ["SPEC", "FedDynObjective", "FedDynParams", "FedDynServer", "feddyn_step"]
