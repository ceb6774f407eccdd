"""PORT: staleness- and divergence-aware buffered asynchronous FL (Su & Li, IWQoS 2022)."""

from raysfl.algorithms.common.fl_spec import fl_spec
from raysfl.algorithms.port.params import PORTParams
from raysfl.algorithms.port.policy import PORTPolicy
from raysfl.algorithms.port.server import PORTServer, cosine, port_weight

SPEC = fl_spec(
    name="port",
    params=PORTParams,
    server=PORTServer,
    description="async FL: buffered updates weighted by staleness b/(s+b) and cosine divergence; bound b",
    source="Su & Li, IWQoS 2022, How Asynchronous can Federated Learning Be?; Plato examples/async/port; "
    "docs/algorithms/port.md",
    per_update=lambda setup: setup.params.buffer_size,
    policy=PORTPolicy,
    policy_options=lambda setup: {
        "hold_above": setup.params.staleness_bound,
        "server_flush": True,
        "request_update": setup.params.request_update,
    },
)

__all__ = ["SPEC", "PORTParams", "PORTPolicy", "PORTServer", "cosine", "port_weight"]
