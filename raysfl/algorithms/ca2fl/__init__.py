"""CA2FL: asynchronous FL with cached update calibration (Wang et al., ICLR 2024; GAS spec §10.10)."""

from raysfl.algorithms.ca2fl.params import CA2FLParams
from raysfl.algorithms.ca2fl.server import CA2FLServer
from raysfl.algorithms.common.fl_spec import fl_spec

SPEC = fl_spec(
    name="ca2fl",
    params=CA2FLParams,
    server=CA2FLServer,
    description="async FL: FedBuff's buffer calibrated with a server cache of every client's latest update",
    source="Wang et al., ICLR 2024, cached update calibration; docs/algorithms/ca2fl.md",
    per_update=lambda setup: setup.params.buffer_size,  # every M arrivals are one global iteration
    policy_options=lambda setup: {"aliased_base": setup.params.job_base == "aliased"},
    optimizer_state=True,
)

__all__ = ["SPEC", "CA2FLParams", "CA2FLServer"]
