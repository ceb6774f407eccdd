"""MOON: model-contrastive federated learning (Li, He & Song, CVPR 2021)."""

from raysfl.algorithms.common.fl_spec import fl_spec
from raysfl.algorithms.fedavg.server import FedAvgServer
from raysfl.algorithms.moon.objective import MOONObjective, contrastive_loss, representation_and_logits
from raysfl.algorithms.moon.params import MOONParams
from raysfl.algorithms.moon.policy import MOONPolicy

SPEC = fl_spec(
    name="moon",
    params=MOONParams,
    server=FedAvgServer,  # MOON Algorithm 1: the server averages the local models weighted by |D_k|
    description="synchronous FL: FedAvg rounds, local loss + μ·model-contrastive loss (global vs previous)",
    source="Li, He & Song, CVPR 2021, Model-Contrastive Federated Learning; docs/algorithms/moon.md",
    per_update=lambda setup: setup.scenario.federation.active_clients,  # one round of C jobs
    synchronous=True,
    objective=lambda setup, model: MOONObjective(model, setup.params.mu, setup.params.temperature),
    policy=MOONPolicy,  # FedAvg's rounds; the frozen forward passes charged when asked (off by default)
    policy_options=lambda setup: {
        "charge_frozen_passes": setup.params.charge_frozen_passes and setup.params.mu > 0
    },
    state_classes=(MOONObjective,),
)

__all__ = [
    "SPEC",
    "MOONObjective",
    "MOONParams",
    "MOONPolicy",
    "contrastive_loss",
    "representation_and_logits",
]
