"""FedAsync: asynchronous FL with staleness-weighted mixing (Xie, Koyejo & Gupta 2019)."""

from raysfl.algorithms.common.fl_spec import fl_spec
from raysfl.algorithms.fedasync.params import FedAsyncParams
from raysfl.algorithms.fedasync.server import FedAsyncServer, mixing_weight

SPEC = fl_spec(
    name="fedasync",
    params=FedAsyncParams,
    server=FedAsyncServer,
    description="async FL: each arriving full model is mixed in at once with α·s(staleness)",
    source="Xie, Koyejo & Gupta 2019, Asynchronous Federated Optimization; docs/algorithms/fedasync.md",
    per_update=lambda setup: 1,  # every arrival is one global iteration
    proximal=lambda setup: setup.params.rho,  # local objective f(x) + ρ/2·‖x − x_τ‖²
)

__all__ = ["SPEC", "FedAsyncParams", "FedAsyncServer", "mixing_weight"]
