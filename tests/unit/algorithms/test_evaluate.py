"""Test-set evaluation of split and whole models: the sums, and the CPU forward in CPU_FORWARD_ROWS chunks."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from raysfl.algorithms.common import evaluate
from raysfl.algorithms.common.evaluate import evaluate_model, evaluate_split, evaluate_split_aux, forward_rows
from raysfl.models import ModelConfig, build_split_model


class RowCounter(nn.Module):
    """Identity that records how many rows each forward call received."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.append(len(x))
        return x


def fixed_server() -> nn.Linear:
    """3 features -> 3 classes: logits = x @ W.T with W twice a permutation matrix."""
    lin = nn.Linear(3, 3, bias=False)
    with torch.no_grad():
        lin.weight.copy_(2.0 * torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]))
    return lin


def test_accuracy_and_loss_match_hand_computed_values() -> None:
    # rows one-hot on feature j give logits 2 at class (j - 1) mod 3 and 0 elsewhere
    x = torch.eye(3).repeat(4, 1)  # 12 rows
    predicted = (torch.arange(12) % 3 - 1) % 3
    y = predicted.clone()
    y[:3] = (y[:3] + 1) % 3  # 3 of 12 wrong
    acc, loss = evaluate_split(nn.Identity(), fixed_server(), x, y, batch_size=5)
    assert acc == pytest.approx(9 / 12)
    right = -math.log(math.exp(2) / (math.exp(2) + 2))  # the true class holds the logit 2
    wrong = -math.log(1 / (math.exp(2) + 2))  # the true class holds a 0
    assert loss == pytest.approx((9 * right + 3 * wrong) / 12, rel=1e-6)


def test_cpu_forward_runs_in_chunks_of_cpu_forward_rows() -> None:
    client = RowCounter()
    x = torch.eye(3).repeat(70, 1)  # 210 rows
    y = torch.zeros(210, dtype=torch.int64)
    evaluate_split(client, fixed_server(), x, y, batch_size=512)
    assert evaluate.CPU_FORWARD_ROWS == 64
    assert client.calls == [64, 64, 64, 18]
    client.calls.clear()
    evaluate_split(client, fixed_server(), x, y, batch_size=50)  # batches smaller than a chunk stay whole
    assert client.calls == [50, 50, 50, 50, 10]


def test_forward_rows_chunks_only_on_the_cpu() -> None:
    assert forward_rows(torch.empty(2), 512) == 64
    assert forward_rows(torch.empty(2), 16) == 16
    assert forward_rows(torch.empty(2, device="meta"), 512) == 512  # any other device: the whole batch


def test_auxiliary_head_sees_the_same_features_per_chunk() -> None:
    client = RowCounter()
    x = torch.eye(3).repeat(50, 1)  # 150 rows
    y = ((torch.arange(150) % 3 - 1) % 3).long()  # the main head's predictions: accuracy 1
    aux = nn.Identity()  # predicts argmax of the features itself: feature j -> class j
    acc, _, aux_acc = evaluate_split_aux(client, fixed_server(), aux, x, y, batch_size=512)
    assert client.calls == [64, 64, 22]
    assert acc == 1.0
    assert aux_acc == pytest.approx(((torch.arange(150) % 3) == y).float().mean().item())
    assert aux_acc == 0.0  # class j never equals (j - 1) mod 3: a misaligned aux chunk would score > 0


@pytest.mark.parametrize("name, channels, size", [("alexnet", 1, 28), ("resnet20", 3, 32)])
def test_chunked_evaluation_equals_the_whole_batch_forward(
    name: str, channels: int, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = build_split_model(ModelConfig(name=name), channels, size, 10, seed=1)
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(300, channels, size, size, generator=gen)
    y = torch.randint(0, 10, (300,), generator=gen)
    chunked = evaluate_split(model.client, model.server, x, y, batch_size=256)
    monkeypatch.setattr(evaluate, "CPU_FORWARD_ROWS", 256)
    whole = evaluate_split(model.client, model.server, x, y, batch_size=256)
    with torch.no_grad():
        logits = model.server(model.client(x))
    reference = ((logits.argmax(1) == y).float().mean().item(), F.cross_entropy(logits, y).item())
    assert chunked[0] == whole[0] == pytest.approx(reference[0])
    # the same per-row logits (bit for bit on the development machine; to float32 rounding anywhere)
    assert chunked[1] == pytest.approx(whole[1], rel=1e-6)
    assert chunked[1] == pytest.approx(reference[1], rel=1e-5)


def test_a_whole_model_is_evaluated_in_eval_mode_in_chunks_with_the_same_sums() -> None:
    counter = RowCounter()
    model = nn.Sequential(counter, nn.Dropout(0.5), fixed_server())
    x = torch.eye(3).repeat(50, 1)  # 150 rows
    y = ((torch.arange(150) % 3 - 1) % 3).long()  # what the fixed server predicts
    y[:30] = (y[:30] + 1) % 3  # 30 of 150 wrong
    acc, loss = evaluate_model(model, x, y, batch_size=100)
    assert counter.calls == [64, 36, 50]  # batches of 100, each forward at most CPU_FORWARD_ROWS rows
    assert not model.training  # dropout off: a training-mode pass would zero features and change both
    assert acc == pytest.approx(120 / 150)
    right = -math.log(math.exp(2) / (math.exp(2) + 2))
    wrong = -math.log(1 / (math.exp(2) + 2))
    assert loss == pytest.approx((120 * right + 30 * wrong) / 150, rel=1e-6)


def test_a_whole_model_scores_as_its_split_parts() -> None:
    model = build_split_model(ModelConfig(name="lenet5"), 1, 28, 10, seed=3)
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(200, 1, 28, 28, generator=gen)
    y = torch.randint(0, 10, (200,), generator=gen)
    assert evaluate_model(model.full(), x, y, 128) == evaluate_split(model.client, model.server, x, y, 128)


def test_the_benchmark_script_prints_its_table() -> None:
    """``benchmarks/eval_rows.py`` on its smallest setting (LeNet-5, one batch of 512 images)."""
    script = Path(__file__).resolve().parents[3] / "benchmarks" / "eval_rows.py"
    args = ["--models", "lenet5", "--scale", "0", "--repeats", "1", "--rows", "32", "--threads", "1"]
    out = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, check=True
    ).stdout
    assert "CPU_FORWARD_ROWS = 64" in out
    row = re.search(
        r"^\| lenet5 \| 1x28x28 \| 512 \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+)x \| (32|64) \(", out, re.M
    )
    assert row, out
    whole, chunked, speedup = map(float, row.groups()[:3])
    assert speedup == pytest.approx(whole / chunked, rel=0.05)  # each printed to 2 decimals
