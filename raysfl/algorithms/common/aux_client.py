"""The local-loss client of CSE-FSL and FSL_AN: client-side model + auxiliary head, no gradient download.

CSE-FSL spec §2.3, Algorithm 1. For each minibatch D̃ of client i:

    smashed = x_c(z)                          forward to the cut layer (the smashed data g_{x_c}(z))
    F_c     = CE(a_c(smashed), y)             local loss through the auxiliary head (eq. 5)
    x_c, a_c ← x_c − η∇_x F_c, a_c − η∇_a F_c one SGD step on both (eq. 8); the gradient reaches x_c
                                              through a_c by ordinary back-propagation

and, for an uploaded batch, ``(smashed, y)`` is handed back for the server: x_c(z) recomputed with the updated
client model (``recompute_after_update``, Algorithm 1 lines 8–12 [P], CSE-FSL's default), or the activations
of that batch's forward pass, before its update (the authors' code [C], FSL_AN; spec §2.7-2).

One :class:`AuxClient` serves every virtual client of a pool; each client's tensors live in its own
:class:`AuxClientState` and are applied with :func:`torch.func.functional_call`, so calls of different clients
may interleave.

Contract with the engine (runs in a client pool, calls in submission order):
    ``load(state, weights, lr)``         receive {"client": x_c, "aux": a_c} (Step 1); fresh optimizer at lr
    ``run(state, num_batches, upload)``  train ``num_batches`` minibatches; if ``upload``, return
                                         ``(smashed, labels)`` of the last one (float32, int64), else None
    ``weights(state)``                   hand back {"client": x_c, "aux": a_c} for aggregation (Step 4)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from raysfl.algorithms.common.fsl_round import EpochCursor
from raysfl.algorithms.common.optim import clip, make_optimizer
from raysfl.algorithms.common.own_rng import seeded
from raysfl.algorithms.config import TrainConfig

Batch = tuple[torch.Tensor, torch.Tensor]
Transform = Callable[[np.ndarray, torch.Generator], torch.Tensor]
Weights = dict[str, dict[str, torch.Tensor]]
PARTS = ("client", "aux")


@dataclass
class AuxClientState:
    """What one virtual client owns; between rounds only its data cursor and RNG streams."""

    client: int
    indices: np.ndarray
    cursor: EpochCursor
    rng: np.random.Generator
    torch_gen: torch.Generator
    params: dict[str, dict[str, torch.Tensor]] | None = None
    buffers: dict[str, dict[str, torch.Tensor]] | None = None
    optimizer: torch.optim.Optimizer | None = None
    batches: int = 0  # minibatches trained so far (all rounds)
    loss_sum: float = 0.0


class AuxClient:
    """Local-loss training of [x_c, a_c] (CSE-FSL Algorithm 1, FSL_AN).

    Args:
        client_model: x_c (the zoo's client part), shared by the pool's clients.
        aux_model: a_c (``SplitModel.aux``).
        train_x, train_y: the training arrays (uint8 images, labels), indexed by each client's indices.
        transform: ``(images, generator) -> float tensor``, the train transform.
        train: B, optimizer settings (the lr is given per round by :meth:`load`).
        drop_last: skip each epoch's last partial batch.
        recompute_after_update: upload x_c(z) recomputed after the batch's update [P] instead of the
            forward-pass activations [C].
        max_grad_norm: clip the gradient norm of [x_c, a_c] (0 = off).
    """

    def __init__(
        self,
        client_model: nn.Module,
        aux_model: nn.Module,
        train_x: np.ndarray,
        train_y: np.ndarray,
        transform: Transform,
        train: TrainConfig,
        drop_last: bool = False,
        recompute_after_update: bool = False,
        max_grad_norm: float = 0.0,
    ) -> None:
        self.modules = {"client": client_model, "aux": aux_model}
        self.train_x = train_x
        self.train_y = train_y
        self.transform = transform
        self.train_cfg = train
        self.drop_last = drop_last
        self.recompute = recompute_after_update
        self.max_grad_norm = max_grad_norm
        self._names = {p: [n for n, _ in m.named_parameters()] for p, m in self.modules.items()}

    def init_state(
        self, client: int, indices: np.ndarray, seed_seq: np.random.SeedSequence
    ) -> AuxClientState:
        """A fresh idle client; its streams are derived as :meth:`SplitClient.init_state` does."""
        rng = np.random.Generator(np.random.PCG64(seed_seq))
        gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
        cursor = EpochCursor(
            num_samples=len(indices), batch_size=self.train_cfg.batch_size, drop_last=self.drop_last
        )
        return AuxClientState(client, np.asarray(indices), cursor, rng, gen)

    # --- engine-facing ---------------------------------------------------------------------------
    def load(self, state: AuxClientState, weights: Weights, lr: float) -> None:
        """Step 1: x_{c,i} = x_c^t, a_{c,i} = a_c^t; a fresh optimizer over both at learning rate ``lr``."""
        state.params, state.buffers = {}, {}
        for part in PARTS:
            w = weights[part]
            state.params[part] = {n: w[n].detach().clone().requires_grad_(True) for n in self._names[part]}
            state.buffers[part] = {n: w[n].detach().clone() for n in w if n not in state.params[part]}
        trainable = [t for part in PARTS for t in state.params[part].values()]
        state.optimizer = make_optimizer(trainable, self.train_cfg, lr=lr)

    def run(self, state: AuxClientState, num_batches: int, upload: bool) -> Batch | None:
        """Train ``num_batches`` minibatches (eq. 8); if ``upload``, return the last (smashed, labels)."""
        if state.params is None or state.optimizer is None or state.buffers is None:
            raise RuntimeError(f"client {state.client}: run before load (no client-side model)")
        out: Batch | None = None
        with seeded(state.torch_gen):
            for i in range(num_batches):
                x, y = self._next_batch(state)
                smashed = self._forward("client", state, x)
                loss = F.cross_entropy(self._forward("aux", state, smashed), y)
                state.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                clip(
                    [t for part in PARTS for t in state.params[part].values()],
                    self.max_grad_norm or self.train_cfg.clip_grad_norm,
                )
                state.optimizer.step()
                state.batches += 1
                state.loss_sum += float(loss.detach())
                if upload and i == num_batches - 1:
                    if self.recompute:
                        with torch.no_grad():
                            smashed = self._forward("client", state, x, keep_buffers=True)
                    out = (smashed.detach().contiguous(), y)
        return out

    def weights(self, state: AuxClientState) -> Weights:
        """Step 4: the trained {x_c, a_c} (detached copies); the client's tensors are released."""
        if state.params is None or state.buffers is None:
            raise RuntimeError(f"client {state.client}: weights requested before load")
        out: Weights = {}
        for part in PARTS:
            d = {n: t.detach().clone() for n, t in state.params[part].items()}
            d.update({n: t.clone() for n, t in state.buffers[part].items()})
            out[part] = d
        state.params = state.buffers = state.optimizer = None
        return out

    # --- internals --------------------------------------------------------------------------------
    def _next_batch(self, state: AuxClientState) -> Batch:
        pos = state.cursor.next_positions(state.rng)
        idx = state.indices[pos]
        x = self.transform(self.train_x[idx], state.torch_gen)
        y = torch.from_numpy(np.asarray(self.train_y[idx], dtype=np.int64))
        return x, y

    def _forward(
        self, part: str, state: AuxClientState, x: torch.Tensor, keep_buffers: bool = False
    ) -> torch.Tensor:
        """``part`` on ``x`` in training mode with the client's tensors.

        ``keep_buffers``: run on copies of the buffers, so a forward that is not a training step (the
        recomputed upload) leaves BatchNorm's running statistics as the step left them; the output is the
        same, as training-mode BatchNorm normalises by the batch's own statistics.
        """
        assert state.params is not None and state.buffers is not None
        module = self.modules[part]
        module.train()
        buffers = state.buffers[part]
        if keep_buffers:
            buffers = {n: t.clone() for n, t in buffers.items()}
        return torch.func.functional_call(module, (state.params[part], buffers), (x,))
