"""The client side of split learning: forward to the cut layer, backward from the returned gradient.

One :class:`SplitClient` serves every virtual client of a pool. Each client's trainable tensors live in
its own :class:`SplitClientState` and are passed to the shared module with
:func:`torch.func.functional_call`, so clients can interleave (client 3 forward, client 5 forward,
client 3 backward) without their autograd graphs touching each other's weights.

Contract with the engine (all methods run inside a client pool, in submission order):
    ``start(state, weights)``  load the global client-side model, forward the first minibatch (eq. (3));
    ``step(state, grads)``     apply the gradient G_k (eq. (8)), then forward the next minibatch;
    ``finish(state, grads)``   apply the last gradient and return the client-side model (GAS step ⑤).
Forward results are ``(activations, labels)``, detached, float32 / int64.

Between a forward and its backward a client keeps only its input batch (and the RNG state the forward
used), not the autograd graph: the backward recomputes the forward with gradients. This costs one more
client-side forward in wall time (never in emulated time), keeps an in-flight client at the size of its
batch instead of its saved activations, and leaves every client state plain tensors, so a run can be
checkpointed at any event (``raysfl.engine.snapshot``). The recomputed forward is bitwise the one whose
activations were sent: same weights, same input, same random state; BatchNorm running statistics are
updated once, by the recomputation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from raysfl import profiling
from raysfl.algorithms.common.batching import BatchCursor
from raysfl.algorithms.common.optim import clip, load_optimizer_state, make_optimizer, save_optimizer_state
from raysfl.algorithms.common.own_rng import draws_randomness, replaying_rng, seeded_if
from raysfl.algorithms.config import TrainConfig

Batch = tuple[torch.Tensor, torch.Tensor]
Transform = Callable[[np.ndarray, torch.Generator], torch.Tensor]


@dataclass
class SplitClientState:
    """Everything one virtual client owns. Idle clients hold only their data cursor and RNG state."""

    client: int
    indices: np.ndarray
    cursor: BatchCursor
    rng: np.random.Generator
    torch_gen: torch.Generator
    params: dict[str, torch.Tensor] | None = None
    buffers: dict[str, torch.Tensor] | None = None
    optimizer: torch.optim.Optimizer | None = None
    pending_x: torch.Tensor | None = field(default=None, repr=False)  # input of the forward awaiting G_k
    pending_rng: torch.Tensor | None = field(default=None, repr=False)  # global torch RNG before it


class SplitClient:
    """Client-side logic shared by the split-learning methods (GAS, async SFL, MiniBatch-SFL, ...)."""

    def __init__(
        self,
        model: nn.Module,
        train_x: np.ndarray,
        train_y: np.ndarray,
        transform: Transform,
        train: TrainConfig,
        shared_optimizer_state: bool = False,
    ) -> None:
        self.model = model
        self.train_x = train_x
        self.train_y = train_y
        self.transform = transform
        self.train = train
        self.shared_optimizer_state = shared_optimizer_state
        self._param_names = [n for n, _ in model.named_parameters()]
        self._shared_state: dict[str, Any] | None = None
        self.seed_forward = draws_randomness(model)  # dropout masks from the client's own stream

    def init_state(
        self, client: int, indices: np.ndarray, seed_seq: np.random.SeedSequence
    ) -> SplitClientState:
        """A fresh idle client: data cursor and its own RNG streams (batch order, augmentation)."""
        rng = np.random.Generator(np.random.PCG64(seed_seq))
        gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
        cursor = BatchCursor(num_samples=len(indices), batch_size=self.train.batch_size)
        return SplitClientState(client, np.asarray(indices), cursor, rng, gen)

    # --- engine-facing methods -------------------------------------------------------------------
    def start(self, state: SplitClientState, weights: dict[str, torch.Tensor]) -> Batch:
        """Receive the client-side model (a state dict) and forward the first minibatch."""
        state.params = {n: weights[n].detach().clone().requires_grad_(True) for n in self._param_names}
        state.buffers = {n: weights[n].detach().clone() for n in weights if n not in state.params}
        state.optimizer = make_optimizer(list(state.params.values()), self.train)
        return self._forward(state)

    def step(self, state: SplitClientState, grads: torch.Tensor) -> Batch:
        """Apply G_k to the client model (eq. (8)) and forward the next minibatch (eq. (3))."""
        self._backward(state, grads)
        return self._forward(state)

    def finish(self, state: SplitClientState, grads: torch.Tensor) -> dict[str, torch.Tensor]:
        """Apply the last G_k and hand back the client-side model; the client becomes idle."""
        self._backward(state, grads)
        assert state.params is not None and state.buffers is not None
        out = {n: t.detach().clone() for n, t in state.params.items()}
        out.update({n: t.clone() for n, t in state.buffers.items()})
        state.params = state.buffers = state.optimizer = None
        return out

    # --- internals --------------------------------------------------------------------------------
    def _forward(self, state: SplitClientState) -> Batch:
        if state.params is None:
            raise RuntimeError(f"client {state.client}: forward before start (no client-side model)")
        if state.pending_x is not None:
            raise RuntimeError(f"invariant broken: client {state.client} has two forward passes in flight")
        with seeded_if(self.seed_forward, state.torch_gen):  # the seed is drawn before the batch's draws
            with profiling.section("client.data"):
                pos = state.cursor.next_positions(state.rng)
                idx = state.indices[pos]
                x = self.transform(self.train_x[idx], state.torch_gen)
                y = torch.from_numpy(np.asarray(self.train_y[idx], dtype=np.int64))
            state.pending_x, state.pending_rng = x, torch.get_rng_state()
            self.model.train()
            with profiling.section("client.forward", len(y)):
                scratch = {n: b.clone() for n, b in (state.buffers or {}).items()}  # running stats: later
                with torch.no_grad():
                    out = torch.func.functional_call(self.model, (state.params, scratch), (x,))
        return out, y

    def _backward(self, state: SplitClientState, grads: torch.Tensor) -> None:
        if (
            state.pending_x is None
            or state.pending_rng is None
            or state.optimizer is None
            or state.params is None
            or state.buffers is None
        ):
            raise RuntimeError(f"client {state.client}: backward without a pending forward pass")
        with profiling.section("client.backward", len(state.pending_x)):  # forward again, then backward
            self.model.train()
            with replaying_rng(state.pending_rng):
                weights = (state.params, state.buffers)
                out = torch.func.functional_call(self.model, weights, (state.pending_x,))
            out.backward(grads.to(out.dtype))
        state.pending_x = state.pending_rng = None
        with profiling.section("client.optimizer"):
            self._step(state)

    def _step(self, state: SplitClientState) -> None:
        """Clip, then one optimizer step (with the shared momentum when the method shares it)."""
        assert state.optimizer is not None and state.params is not None
        clip(state.params.values(), self.train.clip_grad_norm)
        if self.shared_optimizer_state and self._shared_state is not None:
            load_optimizer_state(state.optimizer, self._shared_state)
        state.optimizer.step()
        state.optimizer.zero_grad(set_to_none=True)
        if self.shared_optimizer_state:
            self._shared_state = save_optimizer_state(state.optimizer)
