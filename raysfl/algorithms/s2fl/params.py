"""S2FL options (specs/gas.md §8.1, §10.10, §11 "baseline-specific code behaviour")."""

from __future__ import annotations

from dataclasses import dataclass

from raysfl.algorithms.minibatch_sfl.params import MiniBatchSFLParams
from raysfl.config import Above, option


@dataclass(frozen=True)
class S2FLParams(MiniBatchSFLParams):
    """Options of S2FL: MiniBatch-SFL's options plus activation grouping and adaptive model splitting.

    Tags: [P] the GAS paper's description of the baseline, [C] its reference code, [A] our choice.
    """

    groups: int = option(
        2, ge=1, doc="activation groups per iteration, each stepping its own server copy [C]"
    )
    group_sweeps: int = option(
        100,
        ge=0,
        doc="sweeps of the swap local search that balances the groups [C]",
        applies={"groups": Above(1)},
    )
    group_momentum: str = option(
        "averaged",
        choices=("averaged", "sequential"),
        doc="server optimizer state across group copies: restored per group and averaged [A], or one "
        "optimizer stepped by the groups in turn, last group's state kept [C]",
        applies={"groups": Above(1)},
    )
    candidates: tuple[str, ...] = option(
        (), doc="candidate split names; () = the model's splits up to the scenario's split [C: L1, L2]"
    )
    split_mode: str = option(
        "trained",
        choices=("trained", "code"),
        doc="trained = the chosen split is what the client trains and what the time model charges [P/A]; "
        "code = only the time model changes, training stays at the scenario's split [C]",
    )
