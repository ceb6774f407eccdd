"""Staleness weighting s(τ): the one option group of every method that scales updates by their staleness.

An update trained from global version τ_k that arrives at version t is τ = t − τ_k versions old; these
methods weigh it by s(τ) (Xie, Koyejo & Gupta 2019, "Asynchronous Federated Optimization", §5.2):

* ``constant``: s(τ) = 1 (no scaling; ``"none"`` is accepted as another name for it);
* ``polynomial``: s(τ) = (τ + 1)^(−a), which with a = 0.5 is FedBuff's 1/√(1 + τ) (Nguyen et al. 2022);
* ``hinge``: s(τ) = 1 if τ ≤ b, else 1 / (a·(τ − b) + 1).

FedAsync mixes an arrival in with α·s(τ); FedBuff scales each buffered delta by s(τ). Both take their
options from :class:`StalenessOptions` (keys ``staleness``, ``staleness_a``, ``staleness_b``), so the
choices, documentation and validation are written once; the function itself is
:func:`raysfl.algorithms.common.fl_server.staleness_weight`. GAS's ``weighting`` is not this function:
its s(n) grows with the progress n of the statistics it weighs (recent activations count *more*), see
:class:`raysfl.algorithms.gas.params.GASParams`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from raysfl.config import option

STALENESS_FUNCTIONS = ("constant", "polynomial", "hinge")
"""The staleness functions s(τ), by scenario name."""

STALENESS_SYNONYMS = {"none": "constant"}
"""Other names accepted for a staleness function (FedBuff's scenarios said ``"none"``)."""


def canonical_staleness(kind: str) -> str:
    """The name of the staleness function ``kind`` names (``"none"`` -> ``"constant"``)."""
    return STALENESS_SYNONYMS.get(kind, kind)


def staleness_option(default: str) -> Any:
    """The ``staleness`` field of :class:`StalenessOptions` with another default (a method's own choice).

    A Params class that inherits the group and wants, say, ``"polynomial"`` by default redeclares only
    this one field: ``staleness: str = staleness_option("polynomial")``; doc and choices stay shared.
    """
    return option(
        default,
        choices=STALENESS_FUNCTIONS,
        synonyms=STALENESS_SYNONYMS,
        doc="s(τ) weighting an update τ versions old: constant 1, polynomial (τ+1)^(−a), "
        "hinge 1 / (a(τ−b)+1) past b [P] Xie et al. 2019 §5.2",
    )


@dataclass(frozen=True)
class StalenessOptions:
    """The staleness-weighting option group: which s(τ) and its parameters a and b.

    A method's Params class inherits it (``class FedBuffParams(StalenessOptions)``) and passes
    ``staleness``, ``staleness_a`` and ``staleness_b`` to ``staleness_weight``. The default is
    ``constant`` (no scaling); a method may change it with :func:`staleness_option`. a = 0.5 and b = 4
    are one of the settings Xie et al. explore [A]; with a = 0.5 the polynomial is FedBuff's 1/√(1 + τ).
    """

    staleness: str = staleness_option("constant")
    staleness_a: float = option(
        0.5,
        ge=0,
        doc="a of the polynomial / hinge s(τ) [P]; 0.5 [A]",
        applies={"staleness": ("polynomial", "hinge")},
    )
    staleness_b: int = option(
        4,
        ge=0,
        doc="b of the hinge: updates at most b versions old get s = 1 [P]; 4 [A]",
        applies={"staleness": ("hinge",)},
    )


__all__ = [
    "STALENESS_FUNCTIONS",
    "STALENESS_SYNONYMS",
    "StalenessOptions",
    "canonical_staleness",
    "staleness_option",
]
