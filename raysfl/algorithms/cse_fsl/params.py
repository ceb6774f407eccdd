"""Options of the CSE-FSL family (specs/cse-fsl.md §2.5, §2.7, §4.3): every paper-vs-code difference a field.

One ``Params`` class per registry entry: CSE-FSL itself and the three baselines of its experiments, FSL_AN
(Han et al.), SplitFed V1 / FSL_MC and SplitFed V2 / FSL_OC (Thapa et al.). Each maps to an
:class:`~raysfl.algorithms.common.fsl_round.FSLRules` preset in :mod:`raysfl.algorithms.cse_fsl`.

Tags: [P] the paper (Mu & Shen, "Federated Split Learning with Improved Communication and Storage
Efficiency"; for the baselines, its description of them), [C] the authors' code, [A] our choice where both
are silent. Defaults follow the paper; where the paper is silent, the code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from raysfl.algorithms.common.fsl_round import SERVER_ORDERS, UPLOAD_RULES
from raysfl.config import Below, option

_FEDAVG_WEIGHTS = "FedAvg weights 1/n [P] eq. 14, or |D_i|/Σ|D_j| [C]"


def _local_epochs() -> Any:
    return option(1, ge=1, doc="E: local epochs per round [P]")


def _drop_last(doc: str) -> Any:
    return option(False, doc=f"drop each epoch's last partial minibatch [A]{doc}")


def _lr_decay() -> Any:
    return option(0.99, gt=0, le=1, doc="γ of η_r = η·γ^⌊r/s⌋ [P] CIFAR-10 (F-EMNIST states none: 1.0)")


def _lr_decay_every() -> Any:
    return option(
        10, ge=1, doc="s: rounds between learning-rate decays [P]", applies={"lr_decay": Below(1.0)}
    )


def _aggregation(doc: str) -> Any:
    return option("uniform", choices=("uniform", "data-size"), doc=doc)


def _client_sampling() -> Any:
    return option(
        "random",
        choices=("random", "fixed"),
        doc="U = federation.active_clients of K per round: drawn every round [P], or the first U [C]",
    )


def _init_std() -> Any:
    return option(
        0.05, ge=0, doc="draw every parameter, biases too, from N(0, std²) [C]; 0 = the zoo's init [A]"
    )


@dataclass(frozen=True)
class CSEFSLParams:
    """Options of CSE-FSL: auxiliary-head local loss, one server model, uploads every h batches."""

    h: int = option(
        5, ge=1, doc="h: upload smashed data + labels once every h minibatches [P] (Table V: 5..50)"
    )
    upload_rule: str = option(
        "last_of_window",
        choices=UPLOAD_RULES,
        doc="uploaded batch of each h-window: last = ⌊N_b/h⌋ per epoch, reproduces Table V [C]; "
        "first = Algorithm 1's `m mod h == 0`, ⌈N_b/h⌉ [P]",
    )
    agg_every_batches: int = option(
        0, ge=0, doc="C: FedAvg x_c and a_c every C minibatches; 0 = once per round as the experiments [P]"
    )
    recompute_after_update: bool = option(
        True,
        doc="upload x_c(z) recomputed after the batch's update [P] (Algorithm 1 lines 8-12: update, then "
        "obtain and upload; reproduces Table V's h = 25 gap); false = the forward pass's [C]",
    )
    server_order: str = option(
        "arrival_time",
        choices=SERVER_ORDERS,
        doc="server update order: emulated arrival [P] Fig. 3; round_robin = code [C]; random [P] Fig. 6",
    )
    local_epochs: int = _local_epochs()
    drop_last: bool = _drop_last(" (Table V is the same)")
    lr_decay: float = _lr_decay()
    lr_decay_every: int = _lr_decay_every()
    aggregation: str = _aggregation("eq. 14 weights 1/n [P], or |D_i|/Σ|D_j| [C]")
    client_sampling: str = _client_sampling()
    init_std: float = _init_std()


@dataclass(frozen=True)
class FSLANParams:
    """Options of FSL_AN: auxiliary-head local loss, upload every batch, one server copy per client."""

    average_server_copies: bool = option(
        True, doc="FedAvg the per-client server copies at each aggregation [A] spec §2.7-14 (Han et al.)"
    )
    local_epochs: int = _local_epochs()
    drop_last: bool = _drop_last("; true reproduces Table V's F-EMNIST load [P] (inferred from its numbers)")
    lr_decay: float = _lr_decay()
    lr_decay_every: int = _lr_decay_every()
    aggregation: str = _aggregation(_FEDAVG_WEIGHTS)
    client_sampling: str = _client_sampling()
    init_std: float = _init_std()


@dataclass(frozen=True)
class SplitFedV1Params:
    """Options of SplitFed V1 (FSL_MC): per-batch gradients, one server copy per client."""

    average_server_copies: bool = option(
        True, doc="FedAvg the per-client server copies each round (SplitFed V1) [A] spec §2.7-14"
    )
    local_epochs: int = _local_epochs()
    drop_last: bool = _drop_last(" (Table V: false)")
    lr_decay: float = _lr_decay()
    lr_decay_every: int = _lr_decay_every()
    aggregation: str = _aggregation(_FEDAVG_WEIGHTS)
    client_sampling: str = _client_sampling()
    init_std: float = _init_std()


@dataclass(frozen=True)
class SplitFedV2Params:
    """Options of SplitFed V2 (FSL_OC): per-batch gradients, one shared server model, gradient clipping."""

    max_grad_norm: float = option(
        5.0,
        ge=0,
        doc="gradient clipping [P] (threshold not given: 5.0 [A] spec §2.7-13) on the server and client "
        "updates; 0 = train.clip_grad_norm",
    )
    local_epochs: int = _local_epochs()
    drop_last: bool = _drop_last(" (Table V: false)")
    lr_decay: float = _lr_decay()
    lr_decay_every: int = _lr_decay_every()
    aggregation: str = _aggregation(_FEDAVG_WEIGHTS)
    client_sampling: str = _client_sampling()
    init_std: float = _init_std()
