"""The gradient client of SplitFed V1 (FSL_MC) and V2 (FSL_OC): :class:`SplitClient` with per-round lr.

Per minibatch: forward to the cut layer, upload (smashed, labels), wait for dL/d(smashed), back-propagate and
step (Thapa et al., SplitFed; CSE-FSL spec §4.3). What this adds to :class:`SplitClient` without changing it:

* the learning rate of the round is passed to :meth:`start` (η_r = η·γ^⌊r/s⌋);
* the data cursor can drop each epoch's last partial batch (:class:`EpochCursor`);
* every forward pass seeds the dropout masks from the client's own stream, whatever the model
  (``seed_forward``; :class:`SplitClient` does so only for models with random layers).

Contract with the engine: ``start(state, weights, lr) -> (smashed, labels)``, ``step(state, grads) ->
(smashed, labels)``, ``finish(state, grads) -> weights`` (see :mod:`split_client`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from raysfl.algorithms.common.fsl_round import EpochCursor
from raysfl.algorithms.common.split_client import Batch, SplitClient, SplitClientState


class FSLSplitClient(SplitClient):
    """:class:`SplitClient` for round-based split FL (one round = whole local epochs)."""

    def __init__(self, *args: Any, drop_last: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.drop_last = drop_last
        self.seed_forward = True  # every forward seeds the global generator from the client's stream

    def init_state(
        self, client: int, indices: np.ndarray, seed_seq: np.random.SeedSequence
    ) -> SplitClientState:
        """As :meth:`SplitClient.init_state`, with an :class:`EpochCursor`."""
        state = super().init_state(client, indices, seed_seq)
        state.cursor = EpochCursor(
            num_samples=len(indices), batch_size=self.train.batch_size, drop_last=self.drop_last
        )
        return state

    def start(  # type: ignore[override]  # the FSL policies call it with the round's lr
        self, state: SplitClientState, weights: dict[str, torch.Tensor], lr: float
    ) -> Batch:
        """Load x_c^t, create the optimizer at the round's ``lr``, forward the first minibatch."""
        out = super().start(state, weights)
        assert state.optimizer is not None
        for group in state.optimizer.param_groups:
            group["lr"] = lr
        return out
