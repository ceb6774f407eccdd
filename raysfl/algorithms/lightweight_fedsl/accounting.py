"""Bytes per round of (lightweight) FedSL, predicted from sizes (spec §2.3).

The server counts the same bytes from the tensors it actually receives and sends; the two must agree.

Per client k in round t, with n_k = Σ δ kept activation values out of b_k·A(L_c), ω = 4 bytes per value:

    uplink smashed    S^up_k = n_k·ω + b_k·ℓ + S_mask      ℓ = label bytes (int32: 4 [A] spec §2.3);
                                                          S_mask = 0 (seed) or ⌈b_k·A/8⌉ (bitmap)
    downlink gradient S^dn_k = n_k·ω                       kept entries of ∂F/∂Ã [A] (∂F/∂A = 0 elsewhere)
    aggregation       M_c bytes up and M_c bytes down      only when t mod I = 0 (eq. (14))

The quantized client gradient is used locally and never sent (spec §3.4), so q does not change the bytes.

Example (b = 64, A = 4096, p = 0 so n = 262,144, int32 labels, seed mask; no aggregation):
    >>> client_round_bytes(kept=262_144, batch=64, numel=262_144, label_bytes=4).up
    1048832
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from raysfl.algorithms.lightweight_fedsl.dropout import bitmap_bytes

VALUE_BYTES = 4


@dataclass(frozen=True)
class FedSLBytes:
    """Bytes by kind (one client or a sum over clients)."""

    smashed: int = 0
    labels: int = 0
    mask: int = 0
    gradients: int = 0
    models_up: int = 0
    models_down: int = 0

    @property
    def up(self) -> int:
        """Everything uploaded."""
        return self.smashed + self.labels + self.mask + self.models_up

    @property
    def down(self) -> int:
        """Everything downloaded."""
        return self.gradients + self.models_down

    def __add__(self, other: FedSLBytes) -> FedSLBytes:
        return FedSLBytes(
            self.smashed + other.smashed,
            self.labels + other.labels,
            self.mask + other.mask,
            self.gradients + other.gradients,
            self.models_up + other.models_up,
            self.models_down + other.models_down,
        )


def client_round_bytes(
    kept: int,
    batch: int,
    numel: int,
    label_bytes: int,
    bitmap: bool = False,
    model_bytes: int = 0,
    aggregate: bool = False,
) -> FedSLBytes:
    """One client's bytes in one round.

    Args:
        kept: n_k, activation values kept by the dropout mask (all b·A when p = 0).
        batch: b_k, samples in the minibatch (one label each).
        numel: b_k·A(L_c), the split tensor's size (for the bitmap).
        label_bytes: ℓ.
        bitmap: the mask travels as a bitmap instead of a shared seed.
        model_bytes: M_c, one client-side model transfer.
        aggregate: this round ends with an aggregation (t mod I = 0).
    """
    return FedSLBytes(
        smashed=kept * VALUE_BYTES,
        labels=batch * label_bytes,
        mask=bitmap_bytes(numel) if bitmap else 0,
        gradients=kept * VALUE_BYTES,
        models_up=model_bytes if aggregate else 0,
        models_down=model_bytes if aggregate else 0,
    )


def round_bytes(
    kept: Sequence[int],
    batches: Sequence[int],
    activation_numel: int,
    label_bytes: int,
    bitmap: bool = False,
    model_bytes: int = 0,
    aggregate: bool = False,
) -> FedSLBytes:
    """All K clients' bytes in one round (the sum of :func:`client_round_bytes`)."""
    total = FedSLBytes()
    for n, b in zip(kept, batches, strict=True):
        total = total + client_round_bytes(
            n, b, b * activation_numel, label_bytes, bitmap, model_bytes, aggregate
        )
    return total
