"""Helpers of the layer tests: the zoo's layers of one type, and a layer benchmark's output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch
from torch import nn

from raysfl.models.config import ModelConfig
from raysfl.models.zoo import MODEL_NAMES, MODELS, build_split_model

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


def zoo_layers(kind: type[nn.Module]) -> dict[str, list[nn.Module]]:
    """Each zoo model's layers that are instances of ``kind`` (client and server parts), built on meta."""
    found = {}
    for name in MODEL_NAMES:
        c, size, _ = MODELS[name].inputs[0]
        with torch.device("meta"):  # shapes only
            model = build_split_model(ModelConfig(name=name), c, size, 10, seed=0)
        found[name] = [
            m for part in (model.client, model.server) for m in part.modules() if isinstance(m, kind)
        ]
    return found


def benchmark_stdout(script: str) -> str:
    """What ``benchmarks/<script>`` prints, timed once on one thread."""
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--repeats", "1", "--threads", "1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
