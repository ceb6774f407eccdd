"""Test-set evaluation of a split model [w_c, w_s], of an auxiliary head on its activations, of a model."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from raysfl import profiling

CPU_FORWARD_ROWS = 64
"""Most test rows one forward pass takes on the CPU.

A forward over a whole evaluation batch (512 rows by default) streams every feature map through main
memory; 64 rows at a time keep them in the processor's caches. ``benchmarks/eval_rows.py`` measured
1.1-4x faster evaluations for 9 of the 11 zoo models on two processors (AlexNet 1.1-1.3x, the FedASMU CNN
2.3-4.1x, ResNet-20 2.2-2.9x) and 0.84-1.03x for ResNet-18 and LeNet-5 (benchmarks/RESULTS.md). Each
row's output does not depend on the other rows in eval mode, so the logits are the same up to the
kernels' rounding: bit for bit on the AMD EPYC development machine (torch 2.13) for every zoo model; on an
Intel Xeon (torch 2.11) 4 models' logits differed by up to 6.3e-7 of the largest logit, with no predicted
class changed. A fixed size keeps every run's numbers a function of the machine alone. On other devices
the forward takes the whole batch (a GPU wants large batches).
"""


def forward_rows(x: torch.Tensor, batch_size: int) -> int:
    """Rows per forward pass for an evaluation batch of ``batch_size`` rows held like ``x``."""
    return min(batch_size, CPU_FORWARD_ROWS) if x.device.type == "cpu" else batch_size


def chunked_logits(
    client: nn.Module, server: nn.Module, aux: nn.Module | None, x: torch.Tensor, rows: int
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``server(client(x))`` and ``aux(client(x))`` (``None`` without ``aux``), ``rows`` rows at a time."""
    main, side = [], []
    for start in range(0, len(x), rows):
        feats = client(x[start : start + rows])
        main.append(server(feats))
        if aux is not None:
            side.append(aux(feats))

    def join(parts: list[torch.Tensor]) -> torch.Tensor:
        return parts[0] if len(parts) == 1 else torch.cat(parts)  # one chunk: no copy

    return join(main), join(side) if aux is not None else None


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

    The one test loop of every split model. ``test_x`` is already transformed (normalised, test crop).
    The loss is summed per ``batch_size`` rows (float32 within a batch, float64 across batches); on the
    CPU each batch's forward runs :data:`CPU_FORWARD_ROWS` rows at a time (:func:`forward_rows`). The
    server host puts the test set on the server's device once (``ServerHost``), and the sums stay there
    until the end: one device read per evaluation. The auxiliary accuracy is ``None`` without an ``aux``
    head.
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
            logits, aux_logits = chunked_logits(client, server, aux, x, forward_rows(x, batch_size))
        loss_sum += F.cross_entropy(logits, y, reduction="sum").to(torch.float64)
        correct += (logits.argmax(1) == y).sum()
        if aux_logits is not None:
            aux_correct += (aux_logits.argmax(1) == y).sum()
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


def evaluate_model(
    model: nn.Module,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
    batch_size: int,
    device: torch.device | str = "cpu",
) -> tuple[float, float]:
    """Top-1 accuracy and mean cross-entropy of a whole ``model`` over the test set.

    :func:`evaluate_split` with ``model`` as the client part and nothing after it: the same sums, batches
    and :data:`CPU_FORWARD_ROWS` chunks as every built-in method's evaluation.
    """
    return evaluate_split(model, nn.Identity(), test_x, test_y, batch_size, device)
