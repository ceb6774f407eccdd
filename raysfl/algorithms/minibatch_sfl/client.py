"""Client logic of the synchronous split baselines: :class:`SplitClient` per cut, a batch size per round.

MiniBatch-SFL and S2FL clients do what a GAS client does (forward to the cut, back-propagate the returned
G_k, eq. (3) and (8) of GAS), so one :class:`raysfl.algorithms.common.split_client.SplitClient` per possible
cut does the work; this class only routes a client to the cut it was given for the round and sets its
minibatch size (``batch_rule = "proportional"`` gives each client a size of its own every round).

Contract with the engine (methods run inside a client pool, in submission order):
    ``start_round(state, weights, split, batch_size, fresh_epoch)``  load layers [0, c), forward a minibatch
    ``step(state, grads)``                                           apply G_k, forward the next minibatch
    ``finish(state, grads)``                                         apply the last G_k, return the weights
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from raysfl.algorithms.common.batching import BatchCursor
from raysfl.algorithms.common.split_client import Batch, SplitClient, SplitClientState, Transform
from raysfl.algorithms.config import TrainConfig
from raysfl.algorithms.minibatch_sfl.layers import client_prefix, full_stack


class SyncSplitClient:
    """One :class:`SplitClient` per cut, sharing the training arrays and the per-client states.

    Args:
        model: the scenario's split model; its layers are re-cut at every entry of ``cuts``.
        cuts: split name → number of client-side layers.
        train_x, train_y, transform, train: as for :class:`SplitClient`.
        shared_optimizer_state: one momentum buffer carried from client to client (per cut) [C].
    """

    def __init__(
        self,
        model: Any,
        cuts: Mapping[str, int],
        train_x: np.ndarray,
        train_y: np.ndarray,
        transform: Transform,
        train: TrainConfig,
        shared_optimizer_state: bool = False,
    ) -> None:
        stack = full_stack(model)
        self.parts = {
            split: SplitClient(
                client_prefix(stack, n), train_x, train_y, transform, train, shared_optimizer_state
            )
            for split, n in cuts.items()
        }
        self.split_of: dict[int, str] = {}

    def init_state(
        self, client: int, indices: np.ndarray, seed_seq: np.random.SeedSequence
    ) -> SplitClientState:
        """A fresh idle client (data cursor at batch size B, its own RNG streams); the same for every cut."""
        return next(iter(self.parts.values())).init_state(client, indices, seed_seq)

    def start_round(
        self,
        state: SplitClientState,
        weights: dict[str, torch.Tensor],
        split: str,
        batch_size: int,
        fresh_epoch: bool,
    ) -> Batch:
        """Take the round's client-side model (layers [0, c) of ``split``) and forward the first minibatch.

        With ``fresh_epoch`` the data cursor restarts with a new permutation and ``batch_size`` (the code's
        intended per-round ``DataLoader`` of the proportional batch rule, specs/gas.md §10.10); otherwise the
        client continues its cyclic pass with the batch size it has.
        """
        if fresh_epoch:
            state.cursor = BatchCursor(num_samples=len(state.indices), batch_size=batch_size)
        elif state.cursor.batch_size != batch_size:
            raise RuntimeError(
                f"client {state.client}: batch size {batch_size} asked for without a fresh epoch "
                f"(cursor has {state.cursor.batch_size})"
            )
        self.split_of[state.client] = split
        return self.parts[split].start(state, weights)

    def step(self, state: SplitClientState, grads: torch.Tensor) -> Batch:
        """Apply G_k (GAS eq. (8)) and forward the next minibatch (eq. (3))."""
        return self.parts[self.split_of[state.client]].step(state, grads)

    def finish(self, state: SplitClientState, grads: torch.Tensor) -> dict[str, torch.Tensor]:
        """Apply the last G_k and return the client-side weights (layers [0, c)) for the aggregation."""
        return self.parts[self.split_of.pop(state.client)].finish(state, grads)
