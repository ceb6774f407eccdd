"""The client of the FL baselines: the whole model (client part then server part) trained locally.

One :class:`FLClient` serves every virtual client of a pool; a client job is a single call, so the pool's
shared module can be loaded with the job's starting weights, trained and read back without interleaving.

Contract with the engine (runs inside a client pool, in submission order):
    ``train(state, weights, lr_scale=1, steps=None) -> weights``  E (or ``steps``) local SGD steps on the
                                          client's data from the received global model (FedAvg, McMahan
                                          et al. 2017, Algorithm 1 ClientUpdate) at learning rate
                                          ``lr_scale``·lr; returns the trained full model as a state dict
                                          on the CPU.

A method that changes the local objective (FedProx's proximal term, MOON's model-contrastive term,
FedDyn's dynamic regulariser) passes a :class:`LocalObjective`; what it keeps from one job of a client to
the next (MOON's previous local model, FedDyn's gradient state) lives in ``FLClientState.memory``.

Each client keeps its data cursor and RNG streams across jobs (the batch order continues where the last job
stopped, as the GAS code's cyclic ``DataLoader``, GAS spec §10.11); the optimizer is created afresh for every
job, so no momentum is carried from one job to the next [A], unless ``shared_optimizer_state``: then each job
starts from the optimizer state the pool's previous job left, of whichever client, as the GAS code's one
optimizer object does (GAS spec §10.1 [C]).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from raysfl import profiling
from raysfl.algorithms.common.batching import BatchCursor
from raysfl.algorithms.common.optim import clip, load_optimizer_state, make_optimizer, save_optimizer_state
from raysfl.algorithms.common.own_rng import draws_randomness, seeded_if
from raysfl.algorithms.config import TrainConfig

Transform = Callable[[np.ndarray, torch.Generator], torch.Tensor]
Weights = dict[str, torch.Tensor]


@dataclass
class FLClientState:
    """What one virtual client owns between jobs: its sample indices, data cursor and RNG streams."""

    client: int
    indices: np.ndarray
    cursor: BatchCursor
    rng: np.random.Generator
    torch_gen: torch.Generator
    jobs: int = 0
    memory: dict[str, Any] = field(default_factory=dict)  # per-method state kept across jobs


class LocalObjective(Protocol):
    """A method's local objective; the pool's client logic calls it around and inside each job.

    ``begin`` sees the model loaded with the received global weights before the first step, ``loss``
    returns the minibatch loss to minimise (it must include the cross-entropy), ``end`` sees the trained
    model after the last step and may update ``state.memory``. ``params`` are the trainable parameters in
    ``model.parameters()`` order.
    """

    def begin(self, state: FLClientState, model: nn.Module, params: Sequence[torch.Tensor]) -> None:
        """Prepare a job (e.g. remember the received model)."""
        ...

    def loss(
        self,
        state: FLClientState,
        model: nn.Module,
        params: Sequence[torch.Tensor],
        x: torch.Tensor,
        y: torch.Tensor,
    ) -> torch.Tensor:
        """The loss of one minibatch, cross-entropy included."""
        ...

    def end(self, state: FLClientState, model: nn.Module, params: Sequence[torch.Tensor]) -> None:
        """Finish a job (e.g. store what the next job of this client needs)."""
        ...


class FLClient:
    """Full-model local training shared by FedAvg, FedAsync, FedBuff and CA2FL.

    A job is one :meth:`train` call that reads and writes only the client's state, so the engine may keep
    the state outside the pool between jobs and run each job in the least-loaded pool (``clients_roam``,
    :mod:`raysfl.engine.balance`).

    Args:
        model: the full model (``SplitModel.full()``), shared by every client of the pool.
        train_x: the training images (uint8, indexed by each client's sample indices).
        train_y: the training labels.
        transform: ``(images, generator) -> float tensor``, the scenario's train transform.
        train: the ``[train]`` section (E, B, optimizer, lr, clipping).
        proximal: ρ of FedAsync's regularised local objective f(x) + ρ/2·‖x − x_τ‖² (Xie et al. 2019,
            Algorithm 1) and μ of FedProx's h_k(w; w^t) = F_k(w) + μ/2·‖w − w^t‖² (Li et al. 2020, eq. (2));
            0 gives plain local SGD.
        objective: a method's own local objective; when given it replaces the cross-entropy (and
            ``proximal`` must be 0).
        shared_optimizer_state: carry the optimizer state (SGD's momentum buffers) from each job to the
            pool's next one, whichever clients they are, as the GAS code's single optimizer object does
            (GAS spec §10.1 [C]); every client must then be in one pool. False: a fresh optimizer per job.
    """

    clients_roam = True
    # class defaults, for checkpoints taken before the option existed
    shared_optimizer_state = False
    shared_state: dict[str, Any] | None = None

    def __init__(
        self,
        model: nn.Module,
        train_x: np.ndarray,
        train_y: np.ndarray,
        transform: Transform,
        train: TrainConfig,
        proximal: float = 0.0,
        objective: LocalObjective | None = None,
        shared_optimizer_state: bool = False,
    ) -> None:
        if objective is not None and proximal > 0:
            raise ValueError("give either proximal or objective, not both")
        self.objective = objective
        self.model = model
        self.train_x = train_x
        self.train_y = train_y
        self.transform = transform
        self.train_cfg = train
        self.proximal = float(proximal)
        self.random_layers = draws_randomness(model)  # dropout draws from the client's own stream
        self.shared_optimizer_state = shared_optimizer_state
        self.shared_state = None  # the last job's optimizer state, when shared

    def init_state(self, client: int, indices: np.ndarray, seed_seq: np.random.SeedSequence) -> FLClientState:
        """A fresh idle client: data cursor and its own RNG streams (batch order, augmentation).

        The streams are derived exactly as in :meth:`SplitClient.init_state`, so a client draws the same
        minibatches under an FL and a split method.
        """
        rng = np.random.Generator(np.random.PCG64(seed_seq))
        gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
        cursor = BatchCursor(num_samples=len(indices), batch_size=self.train_cfg.batch_size)
        return FLClientState(client, np.asarray(indices), cursor, rng, gen)

    def next_batch(self, state: FLClientState) -> tuple[torch.Tensor, torch.Tensor]:
        """The client's next minibatch (transformed images, int64 labels) from its cursor."""
        pos = state.cursor.next_positions(state.rng)
        idx = state.indices[pos]
        x = self.transform(self.train_x[idx], state.torch_gen)
        y = torch.from_numpy(np.asarray(self.train_y[idx], dtype=np.int64))
        return x, y

    def train(
        self,
        state: FLClientState,
        weights: Mapping[str, torch.Tensor],
        lr_scale: float = 1.0,
        steps: int | None = None,
    ) -> Weights:
        """Run one job: E minibatch SGD steps (or ``steps``) from ``weights``; return the trained model.

        Each step minimises the cross-entropy of the minibatch (plus ρ/2·‖w − w_start‖² when ``proximal``
        is set, FedAsync's and FedProx's local objective; or the method's ``objective``), clips the
        gradient norm at ``train.clip_grad_norm`` when that is positive and takes one step of a fresh
        optimizer (``make_optimizer``) at learning rate ``lr_scale``·lr (FedSA's per-client rate), which
        starts from the previous job's optimizer state when ``shared_optimizer_state``. ``steps``
        replaces E for this job (a FedProx straggler's partial work).
        ``weights`` is not modified (its values are copied into the pool's module).
        """
        self.model.load_state_dict(dict(weights))
        params = [p for p in self.model.parameters() if p.requires_grad]
        lr = None if lr_scale == 1.0 else self.train_cfg.lr * float(lr_scale)
        optimizer = make_optimizer(params, self.train_cfg, lr=lr)
        if self.shared_optimizer_state and self.shared_state is not None:
            load_optimizer_state(optimizer, self.shared_state)
        anchor = [p.detach().clone() for p in params] if self.proximal > 0 else None
        self.model.train()
        if self.objective is not None:
            self.objective.begin(state, self.model, params)
        with seeded_if(self.random_layers, state.torch_gen):
            for _ in range(self.train_cfg.local_iterations if steps is None else int(steps)):
                with profiling.section("client.data"):
                    x, y = self.next_batch(state)
                with profiling.section("client.forward_backward", len(y)):
                    optimizer.zero_grad(set_to_none=True)
                    if self.objective is not None:
                        loss = self.objective.loss(state, self.model, params, x, y)
                    else:
                        loss = F.cross_entropy(self.model(x), y)
                    if anchor is not None:
                        gap = sum(((p - a) ** 2).sum() for p, a in zip(params, anchor, strict=True))
                        loss = loss + 0.5 * self.proximal * gap
                    loss.backward()
                with profiling.section("client.optimizer"):
                    clip(params, self.train_cfg.clip_grad_norm)
                    optimizer.step()
        if self.objective is not None:
            self.objective.end(state, self.model, params)
        if self.shared_optimizer_state:
            self.shared_state = save_optimizer_state(optimizer)
        state.jobs += 1
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}
