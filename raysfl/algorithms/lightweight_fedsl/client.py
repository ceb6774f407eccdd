"""Client side of (lightweight) FedSL: forward + uplink dropout, then backward, pruning, quantization, step.

Each client keeps its own client-side model w_{c,k} between rounds (aggregation happens only every I rounds)
and its pruning mask m_k. Per round t (Alg. 1, spec §3.1, §3.3, §3.4):

    forward(t)                    A = client(x) (eq. (2)); δ from the shared seed; send ã = δ⊙A/(1−p) at the
                                  kept positions only (eq. (3)), the labels, and the bitmap if configured
    backward(G, t, ρ_t, η)        ∂F/∂A = δ/(1−p) ⊙ ∂F/∂Ã (the received kept values, zeros elsewhere);
                                  g = ∂F/∂w_c (eq. (8)) (+ λw with weight decay);
                                  if Sparsity(w) < ρ_t: ℐ = |w⊙g| (eq. (9)), new mask on the ⌈ρ_t M_p⌉ least
                                  important (masked weights first, so masks are nested);
                                  w̃ = m⊙w, g̃ = m⊙g; w ← w̃ − η Q_q(g̃) (eq. (11)-(13))
    weights()                     w_{c,k} (parameters and BatchNorm buffers) for aggregation (eq. (14))
    load(w_c)                     the aggregated model; m_k = 1[w ≠ 0] (spec §3.3 [A])

All clients start from the run's initial client-side model (the same seed everywhere, spec §3.0), so no
initial download is needed. Runs in a client pool; one instance serves every virtual client of the pool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from raysfl.algorithms.common.batching import BatchCursor
from raysfl.algorithms.common.own_rng import draws_randomness, replaying_rng, seeded_if
from raysfl.algorithms.lightweight_fedsl.dropout import drop, dropout_mask, restore
from raysfl.algorithms.lightweight_fedsl.params import LightweightFedSLParams
from raysfl.algorithms.lightweight_fedsl.pruning import (
    global_masks,
    importance,
    is_prunable,
    prune_count,
)
from raysfl.algorithms.lightweight_fedsl.quantize import quantize_gradients

Transform = Callable[[np.ndarray, torch.Generator], torch.Tensor]
Upload = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]


@dataclass
class FedSLClientState:
    """What one virtual client owns for the whole run."""

    client: int
    indices: np.ndarray
    cursor: BatchCursor
    rng: np.random.Generator
    torch_gen: torch.Generator
    params: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    masks: dict[str, torch.Tensor]
    momentum: dict[str, torch.Tensor] = field(default_factory=dict)  # SGD momentum (μ = 0 in the paper)
    pending_x: torch.Tensor | None = field(default=None, repr=False)  # input of the forward awaiting ∂F/∂Ã
    pending_rng: torch.Tensor | None = field(default=None, repr=False)  # global torch RNG before it
    pending_mask: np.ndarray | None = field(default=None, repr=False)  # its dropout mask δ
    pending_round: int = -1
    prunings: int = 0  # rounds in which the mask was recomputed


class FedSLClient:
    """Client logic of lightweight FedSL (and, with the switches off, traditional FedSL).

    Args:
        model: the client-side module (its initial weights are every client's start).
        train_x, train_y: training arrays, indexed by each client's indices.
        transform: ``(uint8 images, generator) -> float batch``.
        params: the method's options.
        batch_size: b.
        weight_decay: λ added to the gradient (0 in the paper's equations).
        momentum: μ of v ← m⊙(μv + Q(g̃)), w ← w̃ − ηv (0 in the paper's equations, eq. (13)).
        seed: the scenario seed, from which the dropout masks are derived (shared with the server).
    """

    def __init__(
        self,
        model: nn.Module,
        train_x: np.ndarray,
        train_y: np.ndarray,
        transform: Transform,
        params: LightweightFedSLParams,
        batch_size: int,
        weight_decay: float,
        seed: int,
        momentum: float = 0.0,
    ) -> None:
        self.model = model
        self.train_x, self.train_y = train_x, train_y
        self.transform = transform
        self.p = params
        self.batch_size = batch_size
        self.weight_decay = weight_decay
        self.momentum = momentum
        self.seed = seed
        self._initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self._names = [n for n, _ in model.named_parameters()]
        self._prunable = [n for n, t in model.named_parameters() if is_prunable(n, t)]
        self.label_dtype = torch.int32 if params.label_dtype == "int32" else torch.int64
        self.random_layers = draws_randomness(model)  # dropout layers draw from the client's own stream

    def init_state(
        self, client: int, indices: np.ndarray, seed_seq: np.random.SeedSequence
    ) -> FedSLClientState:
        """A client holding the initial model, an all-ones mask and its own data-order / rounding streams."""
        rng = np.random.Generator(np.random.PCG64(seed_seq))
        gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
        cursor = BatchCursor(num_samples=len(indices), batch_size=self.batch_size)
        params = {n: self._initial[n].clone().requires_grad_(True) for n in self._names}
        buffers = {n: t.clone() for n, t in self._initial.items() if n not in params}
        masks = {n: params[n].detach() != 0 for n in self._prunable}
        return FedSLClientState(client, np.asarray(indices), cursor, rng, gen, params, buffers, masks)

    # --- engine-facing -------------------------------------------------------------------------------
    def forward(self, state: FedSLClientState, round_index: int) -> Upload:
        """Eq. (2)-(3): forward the next minibatch; return (kept values of Ã, labels, bitmap or None).

        The input is kept instead of the autograd graph (the backward recomputes the forward with the same
        weights, input and random state, so it is bitwise the pass whose activations were sent; BatchNorm
        statistics move once, in the recomputation), which keeps the client state checkpointable.
        """
        if state.pending_x is not None:
            raise RuntimeError(f"invariant broken: client {state.client} has two forward passes in flight")
        with seeded_if(self.random_layers, state.torch_gen):
            pos = state.cursor.next_positions(state.rng)
            idx = state.indices[pos]
            x = self.transform(self.train_x[idx], state.torch_gen)
            y = torch.from_numpy(np.asarray(self.train_y[idx])).to(self.label_dtype)
            state.pending_x, state.pending_rng = x, torch.get_rng_state()
            self.model.train()
            scratch = {n: b.clone() for n, b in state.buffers.items()}
            with torch.no_grad():
                acts = torch.func.functional_call(self.model, (state.params, scratch), (x,))
        p = self.p.dropout
        mask = dropout_mask(self.seed, state.client, round_index, acts.shape, p, self.p.dropout_granularity)
        state.pending_mask, state.pending_round = mask, round_index
        values = drop(acts, mask, p).contiguous()
        bitmap = torch.from_numpy(np.packbits(mask.reshape(-1))) if self.p.sends_bitmap else None
        return values, y, bitmap

    def backward(
        self, state: FedSLClientState, grad_values: torch.Tensor, round_index: int, target: float, lr: float
    ) -> dict[str, float]:
        """Eq. (8)-(13) for this round; returns the client-side sparsity after the step."""
        if state.pending_x is None or state.pending_mask is None or state.pending_rng is None:
            raise RuntimeError(f"client {state.client}: backward without a pending forward pass")
        if state.pending_round != round_index:
            raise RuntimeError(
                f"invariant broken: client {state.client} got round {round_index}'s gradient in round "
                f"{state.pending_round}"
            )
        self.model.train()
        with replaying_rng(state.pending_rng):
            acts = torch.func.functional_call(self.model, (state.params, state.buffers), (state.pending_x,))
        mask = state.pending_mask
        state.pending_x = state.pending_rng = state.pending_mask = None
        p = self.p.dropout
        grad_acts = restore(grad_values.to(acts.dtype), mask) / (1.0 - p)  # ∂F/∂A = δ/(1−p)·∂F/∂Ã
        names = self._names
        grads = torch.autograd.grad(acts, [state.params[n] for n in names], grad_acts, allow_unused=True)
        g = {
            n: (torch.zeros_like(state.params[n]) if gr is None else gr.detach())
            for n, gr in zip(names, grads, strict=True)
        }
        with torch.no_grad():
            if self.weight_decay:
                for n in names:
                    g[n] = g[n] + self.weight_decay * state.params[n]
            apply = self._maybe_prune(state, g, target) or not self.p.literal_regrowth
            if apply:
                for n, m in state.masks.items():
                    state.params[n].mul_(m)
                    g[n] = g[n] * m
            q = quantize_gradients(
                [g[n] for n in names], self.p.quant_bits, state.torch_gen, self.p.quant_scope
            )
            for n, gq in zip(names, q, strict=True):
                step = gq
                if self.momentum:
                    v = state.momentum.get(n)
                    step = gq if v is None else self.momentum * v + gq
                    if apply and n in state.masks:
                        step = step * state.masks[n]
                    state.momentum[n] = step
                state.params[n].sub_(lr * step)
        return {"sparsity": self.sparsity(state)}

    def weights(self, state: FedSLClientState) -> dict[str, torch.Tensor]:
        """w_{c,k} for the aggregation (eq. (14)): detached copies of parameters and buffers."""
        out = {n: t.detach().clone() for n, t in state.params.items()}
        out.update({n: t.clone() for n, t in state.buffers.items()})
        return out

    def load(self, state: FedSLClientState, weights: dict[str, torch.Tensor]) -> None:
        """Take the aggregated w_c; the mask becomes 1[w ≠ 0] (pruning resumes next round, spec §3.3)."""
        state.params = {n: weights[n].detach().clone().requires_grad_(True) for n in self._names}
        state.buffers = {n: weights[n].detach().clone() for n in weights if n not in state.params}
        state.masks = {n: state.params[n].detach() != 0 for n in self._prunable}
        state.momentum = {}

    # --- pruning ------------------------------------------------------------------------------------
    def sparsity(self, state: FedSLClientState) -> float:
        """Fraction of exact zeros among the prunable client-side weights."""
        total = sum(state.params[n].numel() for n in self._prunable)
        zeros = sum(int((state.params[n] == 0).sum()) for n in self._prunable)
        return zeros / total if total else 0.0

    def _maybe_prune(self, state: FedSLClientState, g: dict[str, torch.Tensor], target: float) -> bool:
        """Alg. 1 l. 14-18: when Sparsity(w) < ρ_t, recompute the mask from ℐ = |w⊙g|; True if it did."""
        if target <= 0 or not self._prunable:
            return False
        total = sum(state.params[n].numel() for n in self._prunable)
        zeros = sum(int((state.params[n] == 0).sum()) for n in self._prunable)
        if zeros >= prune_count(target, total):
            return False
        # persistent masks rank the masked weights first (nested masks); Alg. 1 literally ranks ℐ alone, so a
        # weight that regrew since competes again
        nested = not self.p.literal_regrowth
        scores = {
            n: importance(state.params[n], g[n], state.masks[n] if nested else None) for n in self._prunable
        }
        state.masks = global_masks(scores, target, self.p.prune_scope)
        state.prunings += 1
        return True
