"""Communication and storage accounting of CSE-FSL and its baselines (CSE-FSL spec §3).

Two halves that must agree:

* :func:`tensor_bytes` counts what a message actually carries (``numel · element_size`` of each tensor in
  it); the server applies it to every tensor it receives and sends, and those counters are what a run reports.
* :func:`round_bytes` and :func:`storage_params` predict the same numbers from sizes alone (client dataset
  sizes, B, the cut-layer width q, parameter counts), following the rules of :mod:`fsl_round`. They reproduce
  the paper's Table V (``tests/unit/algorithms/test_cse_fsl_accounting.py``) and the counted bytes of a run.

Per client per round (b = 4 bytes per float32, ℓ = 8 bytes per int64 label; spec §3.2):

    ============  ======================  ==================  =========================  ===============
    method        smashed ↑               gradients ↓         models ↑ and ↓ (each)      labels ↑
    ============  ======================  ==================  =========================  ===============
    FSL_MC/OC     N_i·q·b                 N_i·q·b             A·P_c·b                    N_i·ℓ
    FSL_AN        N_i·q·b                 0                   A·(P_c+P_a)·b              N_i·ℓ
    CSE_FSL_h     S_i(h)·q·b              0                   A·(P_c+P_a)·b              S_i(h)·ℓ
    ============  ======================  ==================  =========================  ===============

N_i counts the samples in the batches actually formed (``drop_last`` drops the partial one), S_i(h) those of
the uploaded batches, A the aggregations per round. The paper's load ("GB", which are GiB = 2^30 bytes,
spec §3.3) is smashed + gradients + models, without labels.

Server storage in parameters (Table V "Storage (M)", spec §3.4), with n clients per round:
FSL_MC n(P_c+P_s), FSL_OC P_s + nP_c, FSL_AN n(P_c+P_s+P_a), CSE_FSL P_s + n(P_c+P_a): the server-side model
copies plus the n client-side models (and auxiliary heads) buffered for aggregation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from raysfl.algorithms.common.costs import LABEL_BYTES
from raysfl.algorithms.common.fsl_round import (
    FSLRules,
    num_segments,
    round_batch_sizes,
    segments,
    upload_batches,
)

GIB = 2**30
"""The paper's "GB" (Table V loads only reproduce with 2^30 bytes, CSE-FSL spec §3.3)."""
VALUE_BYTES = 4


def tensor_bytes(obj: Any) -> int:
    """Bytes of every tensor in ``obj`` (a tensor, or dicts / lists / tuples of them): Σ numel·element_size.

    Example:
        >>> tensor_bytes({"w": torch.zeros(3, 2), "labels": torch.zeros(5, dtype=torch.int64)})
        64
    """
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, Mapping):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0


def tensor_numel(obj: Any) -> int:
    """Number of values of every tensor in ``obj`` (parameters held, for storage)."""
    if isinstance(obj, torch.Tensor):
        return obj.numel()
    if isinstance(obj, Mapping):
        return sum(tensor_numel(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_numel(v) for v in obj)
    return 0


@dataclass(frozen=True)
class RoundBytes:
    """Bytes by kind and direction (summed over clients, over one or more rounds)."""

    smashed: int = 0  # activations up
    labels: int = 0  # labels up (not in the paper's load)
    gradients: int = 0  # dL/d(smashed) down
    models_up: int = 0  # client-side model (+ auxiliary head) up, for aggregation
    models_down: int = 0  # the aggregated model down

    @property
    def up(self) -> int:
        """Everything uploaded."""
        return self.smashed + self.labels + self.models_up

    @property
    def down(self) -> int:
        """Everything downloaded."""
        return self.gradients + self.models_down

    @property
    def load(self) -> int:
        """The paper's communication load: smashed + gradients + models, labels excluded (spec §3.2)."""
        return self.smashed + self.gradients + self.models_up + self.models_down

    def __add__(self, other: RoundBytes) -> RoundBytes:
        return RoundBytes(
            self.smashed + other.smashed,
            self.labels + other.labels,
            self.gradients + other.gradients,
            self.models_up + other.models_up,
            self.models_down + other.models_down,
        )

    def __mul__(self, k: int) -> RoundBytes:
        return RoundBytes(
            self.smashed * k, self.labels * k, self.gradients * k, self.models_up * k, self.models_down * k
        )


def client_round_bytes(
    rules: FSLRules,
    num_samples: int,
    batch_size: int,
    activation_bytes: int,
    model_bytes: int,
    label_bytes: int = LABEL_BYTES,
    aggregations: int | None = None,
) -> RoundBytes:
    """One client's bytes in one round.

    Args:
        rules: the method.
        num_samples: N_i.
        batch_size: B.
        activation_bytes: q·b, one sample's smashed data.
        model_bytes: one client-side model (+ auxiliary head) transfer.
        label_bytes: ℓ per label.
        aggregations: A; default the client's own number of aggregation segments.
    """
    sizes = round_batch_sizes(num_samples, batch_size, rules.drop_last, rules.local_epochs)
    up = upload_batches(len(sizes), rules.h, rules.upload_rule) if rules.local_loss else range(len(sizes))
    sent = sum(sizes[m] for m in up)
    a = len(segments(len(sizes), rules.agg_every_batches)) if aggregations is None else aggregations
    return RoundBytes(
        smashed=sent * activation_bytes,
        labels=sent * label_bytes,
        gradients=0 if rules.local_loss else sent * activation_bytes,
        models_up=a * model_bytes,
        models_down=a * model_bytes,
    )


def round_bytes(
    rules: FSLRules,
    client_sizes: Sequence[int],
    batch_size: int,
    activation_numel: int,
    client_params: int,
    aux_params: int = 0,
    value_bytes: int = VALUE_BYTES,
    label_bytes: int = LABEL_BYTES,
) -> RoundBytes:
    """Bytes of one round over the participating clients of sizes ``client_sizes`` (spec §3.2).

    Model transfers carry P_c (+ P_a for the local-loss methods) values; a client whose data ends before the
    last aggregation of a round skips the later ones (:func:`segments`).
    """
    model_bytes = (client_params + (aux_params if rules.local_loss else 0)) * value_bytes
    total = RoundBytes()
    for n in client_sizes:
        total = total + client_round_bytes(
            rules, n, batch_size, activation_numel * value_bytes, model_bytes, label_bytes
        )
    return total


def table_v_load_gib(
    rules: FSLRules,
    client_sizes: Sequence[int],
    batch_size: int,
    activation_numel: int,
    client_params: int,
    aux_params: int,
    rounds: int,
) -> float:
    """Table V "Load (GB)": ``rounds`` · round load / 2^30 (labels not counted, spec §3.3)."""
    per_round = round_bytes(rules, client_sizes, batch_size, activation_numel, client_params, aux_params)
    return per_round.load * rounds / GIB


def storage_params(
    rules: FSLRules, clients: int, client_params: int, server_params: int, aux_params: int = 0
) -> int:
    """Parameters the server holds at the aggregation point (Table V "Storage (M)" · 10^6, spec §3.4)."""
    server = clients * server_params if rules.server_copies else server_params
    buffered = clients * (client_params + (aux_params if rules.local_loss else 0))
    return server + buffered


def aggregations_per_round(rules: FSLRules, client_sizes: Sequence[int], batch_size: int) -> int:
    """Aggregations (global model versions) per round for these clients."""
    nbs = [len(round_batch_sizes(n, batch_size, rules.drop_last, rules.local_epochs)) for n in client_sizes]
    return num_segments(nbs, rules.agg_every_batches)
