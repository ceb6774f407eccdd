"""FedBuff: buffered asynchronous aggregation on the full model (Nguyen et al. 2022; GAS spec §10.10)."""

from raysfl.algorithms.common.fl_spec import fl_spec
from raysfl.algorithms.fedbuff.params import FedBuffParams
from raysfl.algorithms.fedbuff.server import FedBuffServer, buffered_coefficient

SPEC = fl_spec(
    name="fedbuff",
    params=FedBuffParams,
    server=FedBuffServer,
    description="async FL: full-model deltas fill a buffer of K_buf, then one server step",
    source="Nguyen et al. 2022, buffered asynchronous aggregation; docs/algorithms/fedbuff.md",
    per_update=lambda setup: setup.params.buffer_size,  # every K_buf arrivals are one global iteration
    optimizer_state=True,
)

__all__ = ["SPEC", "FedBuffParams", "FedBuffServer", "buffered_coefficient"]
