"""Round structure shared by CSE-FSL and its baselines (SplitFed V1/FSL_MC, SplitFed V2/FSL_OC, FSL_AN).

CSE-FSL spec §2-§3. One *round* (global epoch) = every participating client runs ``local_epochs`` passes over
its local data in minibatches of B; the client-side model (and auxiliary head) is then FedAvg-aggregated.
Everything here is pure arithmetic on sizes, shared by the policy (timing), the accounting functions (Table V)
and the clients, so the three always agree on which batches exist and which are uploaded.

    N_b         = ⌈N_i / B⌉ batches per epoch (⌊N_i / B⌋ with ``drop_last``); the last may be partial
    uploads     ``last_of_window``:  m with (m + 1) mod h = 0 → ⌊N_b/h⌋ per epoch (authors' code [C], Table V)
                ``first_of_window``: m with m mod h = 0       → ⌈N_b/h⌉ per epoch (Algorithm 1 literal [P])
    segments    aggregation every C = ``agg_every_batches`` batches (0 = once per round, the experiments [P])
    η_r         = η · γ^⌊r / s⌋ (CIFAR-10: γ = 0.99, s = 10 [P] §VI-A)

Example:
    >>> upload_batches(21, 2, "last_of_window"), upload_batches(5, 2, "first_of_window")
    ([1, 3, 5, 7, 9, 11, 13, 15, 17, 19], [0, 2, 4])
    >>> round_batch_sizes(209, 10, drop_last=False)[-2:], len(round_batch_sizes(209, 10, drop_last=True))
    ([10, 9], 20)
    >>> chunks(0, 7, {1, 3, 5})
    [(0, 2, True), (2, 4, True), (4, 6, True), (6, 7, False)]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from raysfl.algorithms.common.batching import BatchCursor

UPLOAD_RULES = ("last_of_window", "first_of_window")
SERVER_ORDERS = ("arrival_time", "round_robin", "random")


@dataclass(frozen=True)
class FSLRules:
    """Everything that distinguishes the four methods, plus the round options they share.

    Built by each method package from its ``Params`` (``rules(params)``); the shared client, server, policy
    and accounting read only this.

    Attributes:
        method: registry name.
        local_loss: the client trains through an auxiliary head on a local loss; no gradient is downloaded
            (CSE-FSL, FSL_AN). Otherwise every batch waits for dL/d(smashed) from the server (FSL_MC, FSL_OC).
        server_copies: one server-side model per client (FSL_MC, FSL_AN) instead of a single one.
        h: local-loss methods upload smashed data + labels of one batch in every h (1 = every batch).
        upload_rule: which batch of each h-window is uploaded (module docstring).
        agg_every_batches: aggregate the client-side models every this many batches; 0 = once per round.
        recompute_after_update: upload g(x) recomputed with the updated client model instead of the
            activations of the forward pass (CSE-FSL spec §2.7-2).
        server_order: order in which the single server model consumes uploads (CSE-FSL spec §2.7-5).
        local_epochs: E, passes over the local data per round.
        drop_last: skip the last partial batch of every epoch.
        lr_decay, lr_decay_every: η_r = η·γ^⌊r/s⌋.
        aggregation: ``uniform`` (1/n, eq. 14 [P]) or ``data-size`` (|D_i|/Σ|D_j| [C]).
        client_sampling: ``random`` U of K per round [P] or ``fixed`` the first U [C].
        average_server_copies: FedAvg the per-client server copies at each aggregation (SplitFed, Han et al.).
        max_grad_norm: gradient clipping on both sides (FSL_OC's fix); 0 = ``train.clip_grad_norm``.
        init_std: re-initialise every parameter from N(0, std²) (authors' code [C]); 0 = the zoo's init.
    """

    method: str
    local_loss: bool
    server_copies: bool
    h: int = 1
    upload_rule: str = "last_of_window"
    agg_every_batches: int = 0
    recompute_after_update: bool = False
    server_order: str = "arrival_time"
    local_epochs: int = 1
    drop_last: bool = False
    lr_decay: float = 1.0
    lr_decay_every: int = 1
    aggregation: str = "uniform"
    client_sampling: str = "random"
    average_server_copies: bool = True
    max_grad_norm: float = 0.0
    init_std: float = 0.0

    def __post_init__(self) -> None:
        """Reject values no method accepts."""
        if self.h < 1:
            raise ValueError(f"h must be >= 1, got {self.h}")
        if self.upload_rule not in UPLOAD_RULES:
            raise ValueError(f"upload_rule must be one of {UPLOAD_RULES}, got {self.upload_rule!r}")
        if self.server_order not in SERVER_ORDERS:
            raise ValueError(f"server_order must be one of {SERVER_ORDERS}, got {self.server_order!r}")
        if not self.local_loss and (self.h != 1 or self.agg_every_batches):
            raise ValueError("gradient methods upload every batch and aggregate once per round")


def batches_per_epoch(num_samples: int, batch_size: int, drop_last: bool) -> int:
    """N_b = ⌈N/B⌉, or ⌊N/B⌋ with ``drop_last``."""
    return num_samples // batch_size if drop_last else -(-num_samples // batch_size)


def round_batch_sizes(num_samples: int, batch_size: int, drop_last: bool, epochs: int = 1) -> list[int]:
    """Sizes of the minibatches of one round (``epochs`` passes), in order."""
    nb = batches_per_epoch(num_samples, batch_size, drop_last)
    one = [min(batch_size, num_samples - j * batch_size) for j in range(nb)]
    return one * epochs


def upload_batches(num_batches: int, h: int, rule: str) -> list[int]:
    """Indices m (0-based, counted over the round) of the batches whose smashed data is uploaded."""
    if rule == "last_of_window":
        return [m for m in range(num_batches) if (m + 1) % h == 0]
    if rule == "first_of_window":
        return [m for m in range(num_batches) if m % h == 0]
    raise ValueError(f"unknown upload rule {rule!r}; choose one of {UPLOAD_RULES}")


def segments(num_batches: int, agg_every: int) -> list[tuple[int, int]]:
    """Batch ranges ``[a, b)`` between aggregations; one range per round when ``agg_every`` is 0."""
    step = agg_every if agg_every > 0 else max(num_batches, 1)
    return [(a, min(a + step, num_batches)) for a in range(0, num_batches, step)]


def num_segments(num_batches: list[int], agg_every: int) -> int:
    """Aggregations per round when clients hold ``num_batches`` batches (the longest client decides)."""
    longest = max(num_batches, default=0)
    return 1 if agg_every <= 0 else max(1, math.ceil(longest / agg_every))


def chunks(start: int, end: int, uploads: set[int]) -> list[tuple[int, int, bool]]:
    """Split ``[start, end)`` into client calls ``(a, b, upload)`` ending at uploaded batches (or ``end``)."""
    out: list[tuple[int, int, bool]] = []
    a = start
    for m in range(start, end):
        if m in uploads:
            out.append((a, m + 1, True))
            a = m + 1
    if a < end:
        out.append((a, end, False))
    return out


def round_lr(lr: float, decay: float, every: int, round_index: int) -> float:
    """η_r = η·γ^⌊r/s⌋ (CSE-FSL §VI-A: "decays every 10 rounds with rate 0.99")."""
    return lr * decay ** (round_index // max(every, 1))


@dataclass
class EpochCursor(BatchCursor):
    """:class:`BatchCursor` that can skip each epoch's last partial batch (``DataLoader(drop_last=True)``).

    Without ``drop_last`` it is exactly a :class:`BatchCursor`; rounds consume whole epochs, so the cursor is
    at an epoch boundary whenever a round starts.
    """

    drop_last: bool = False

    def next_positions(self, rng: np.random.Generator) -> np.ndarray:
        """The next minibatch's positions; with ``drop_last`` a partial one is skipped (next epoch)."""
        out = super().next_positions(rng)
        if self.drop_last and len(out) < self.batch_size and self.num_samples >= self.batch_size:
            out = super().next_positions(rng)
        return out


def normal_init(modules: list[torch.nn.Module | None], std: float, seed: int) -> None:
    """Draw every parameter (biases included) from N(0, std²), module by module (authors' code [C] §2.5)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in modules:
            if module is None:
                continue
            for p in module.parameters():
                p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * std)
