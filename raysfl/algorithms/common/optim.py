"""Optimizers from the scenario's ``[train]`` section."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from raysfl.algorithms.config import TrainConfig
from raysfl.config import option


def make_optimizer(
    params: Iterable[torch.Tensor], train: TrainConfig, lr: float | None = None
) -> torch.optim.Optimizer:
    """SGD(lr, momentum, weight decay) [P GAS App. E] or Adam(lr, weight decay) (GAS App. H for ViT)."""
    rate = train.lr if lr is None else lr
    if train.optimizer == "adam":
        return torch.optim.Adam(params, lr=rate, weight_decay=train.weight_decay)
    return torch.optim.SGD(params, lr=rate, momentum=train.momentum, weight_decay=train.weight_decay)


def clip(params: Iterable[torch.Tensor], max_norm: float) -> None:
    """Clip the gradient norm when ``max_norm > 0`` (the GAS code clips at 10 [C])."""
    if max_norm > 0:
        torch.nn.utils.clip_grad_norm_(list(params), max_norm)


def save_optimizer_state(opt: torch.optim.Optimizer) -> dict[str, Any]:
    """A copy of the optimizer's per-parameter state in parameter order (momentum buffers, Adam moments).

    With :func:`load_optimizer_state` into a fresh optimizer over other tensors of the same shapes, it
    carries the state from one job to the next as one optimizer object does whose parameters are loaded
    in place (the GAS code's shared optimizer, GAS spec §10.1 [C]).
    """
    params = [p for g in opt.param_groups for p in g["params"]]
    return {
        "state": [
            {k: v.clone() if torch.is_tensor(v) else v for k, v in opt.state[p].items()} for p in params
        ]
    }


def load_optimizer_state(opt: torch.optim.Optimizer, saved: dict[str, Any]) -> None:
    """Give ``opt``'s parameters, in order, a copy of the state :func:`save_optimizer_state` saved."""
    params = [p for g in opt.param_groups for p in g["params"]]
    for p, st in zip(params, saved["state"], strict=True):
        opt.state[p] = {k: v.clone() if torch.is_tensor(v) else v for k, v in st.items()}


def optimizer_state_option() -> Any:
    """The ``optimizer_state`` option of the GAS code's FL baselines (FedAvg, FedBuff, CA2FL).

    ``"per-job"``: each job starts a fresh optimizer [A]; ``"shared"``: SGD's momentum buffers carry from
    each job to the next, whichever client runs it, as the GAS code's one optimizer object does (GAS spec
    §10.1 [C]). Shared, the asynchronous methods train each job when it is due, as the code does, so the
    buffer passes through the jobs in the order they finish; FedAvg's pass in the order its round starts
    them (ascending client id) [A].
    """
    return option(
        "per-job",
        choices=("per-job", "shared"),
        doc="client momentum starts fresh with each job [A], or one buffer carried across all clients' "
        "jobs [C] GAS §10.1",
    )


def shared_optimizer_single_pool(params: Any) -> tuple[str, str] | None:
    """``AlgorithmSpec.single_pool`` of a method with an ``optimizer_state`` option: shared needs one pool."""
    if params.optimizer_state != "shared":
        return None
    return (
        "algorithm.params.optimizer_state: 'shared' "
        "(one momentum buffer for all clients, as in the GAS code)",
        "use 'per-job' with several pools",
    )
