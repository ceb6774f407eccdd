"""Literal registry of the methods raysfl runs."""

from raysfl.algorithms import (
    aso_fed,
    ca2fl,
    cse_fsl,
    fedasmu,
    fedasync,
    fedavg,
    fedbuff,
    feddyn,
    fedlws,
    fedprox,
    fedsa,
    fedssmu,
    gas,
    lightweight_fedsl,
    minibatch_sfl,
    moon,
    port,
    s2fl,
)
from raysfl.algorithms.base import AlgorithmSpec

ALGORITHMS: dict[str, AlgorithmSpec] = {
    spec.name: spec
    for spec in (
        gas.SPEC,
        fedavg.SPEC,
        fedasync.SPEC,
        fedbuff.SPEC,
        ca2fl.SPEC,
        fedprox.SPEC,
        moon.SPEC,
        feddyn.SPEC,
        fedlws.SPEC,
        port.SPEC,
        aso_fed.SPEC,
        fedsa.SPEC,
        fedasmu.SPEC,
        fedssmu.SPEC,
        minibatch_sfl.SPEC,
        s2fl.SPEC,
        cse_fsl.SPEC,
        cse_fsl.SPLITFED_V1_SPEC,
        cse_fsl.SPLITFED_V2_SPEC,
        cse_fsl.FSL_AN_SPEC,
        lightweight_fedsl.SPEC,
        lightweight_fedsl.BASELINE_SPEC,
    )
}

__all__ = ["ALGORITHMS", "AlgorithmSpec"]
