"""Test-set evaluation of a split model [w_c, w_s] (and of an auxiliary head on the same activations)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from raysfl import profiling


@torch.no_grad()
def evaluate_split_aux(
    client: nn.Module,
    server: nn.Module,
    aux: nn.Module | None,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
    batch_size: int,
    device: torch.device | str = "cpu",
) -> tuple[float, float, float | None]:
    """Top-1 accuracy and mean cross-entropy of ``server(client(x))``, and the accuracy of ``aux(client(x))``.

    The one test loop of every split model. ``test_x`` is already transformed (normalised, test crop);
    batching does not change the result. The server host puts the test set on the server's device once
    (``ServerHost``), and the sums stay there until the end: one device read per evaluation. The
    auxiliary accuracy is ``None`` without an ``aux`` head.
    """
    for m in (client, server, aux):
        if m is not None:
            m.eval()
    # running sums on the device: no device read per batch; float64 adds the per-batch float32 sums
    # exactly as Python floats would
    correct = torch.zeros((), dtype=torch.int64, device=device)
    aux_correct = torch.zeros((), dtype=torch.int64, device=device)
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    for start in range(0, len(test_y), batch_size):
        x = test_x[start : start + batch_size].to(device)  # no copy when the test set is there already
        y = test_y[start : start + batch_size].to(device)
        with profiling.section("eval.forward", len(y)):
            feats = client(x)
            logits = server(feats)
        loss_sum += F.cross_entropy(logits, y, reduction="sum").to(torch.float64)
        correct += (logits.argmax(1) == y).sum()
        if aux is not None:
            aux_correct += (aux(feats).argmax(1) == y).sum()
    n = max(len(test_y), 1)
    return int(correct) / n, float(loss_sum) / n, (int(aux_correct) / n if aux is not None else None)


def evaluate_split(
    client: nn.Module,
    server: nn.Module,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
    batch_size: int,
    device: torch.device | str = "cpu",
) -> tuple[float, float]:
    """Top-1 accuracy and mean cross-entropy of ``server(client(x))`` over the whole test set."""
    acc, loss, _ = evaluate_split_aux(client, server, None, test_x, test_y, batch_size, device)
    return acc, loss
