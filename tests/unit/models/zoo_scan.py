"""Helpers of the layer tests: a zoo model's run setup, its layers of one type, a layer benchmark's output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

from raysfl.algorithms.base import RunSetup
from raysfl.models.config import ModelConfig
from raysfl.models.zoo import MODEL_NAMES, MODELS, build_split_model
from raysfl.scenario import scenario_from_dict

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


def zoo_setup(name: str, **engine: Any) -> RunSetup:
    """The run setup ``hosts.build_model`` builds zoo model ``name`` from: its first input shape, synthetic
    data of that shape (62 classes for the FEMNIST network, else 10), and the given ``engine`` options."""
    shape = MODELS[name].inputs[0]
    classes = 62 if name == "cse_fsl_femnist" else 10
    c, h, _ = shape
    data = {"dataset": "synthetic", "partition": "iid", "synthetic_channels": c, "synthetic_image_size": h}
    if classes != 10:
        data["synthetic_classes"] = classes
    sc = scenario_from_dict({"data": data, "model": {"name": name}, "engine": engine})
    return RunSetup(sc, None, shape, classes, (), None)


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
