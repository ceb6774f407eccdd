"""The GPU tests stay runnable where no GPU is: ``tests/gpu`` with a CPU server, for one method of each kind.

``tests/gpu`` is skipped without CUDA, so nothing else runs its code between the sessions that have a GPU.
``RAYSFL_TEST_SERVER_DEVICE=cpu`` runs it with a CPU server (its synchronisation audit then counts nothing,
but its bookkeeping, reports and runs execute); here, in a separate pytest process, for GAS, SplitFed V1 and
FedAvg on the local backend, and the zoo test for two models.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_with_a_cpu_server(test_file: str, selection: str, report: Path) -> str:
    """Run ``tests/gpu/<test_file>``'s tests matching ``-k selection`` with a CPU server; pytest's output."""
    env = {**os.environ, "RAYSFL_TEST_SERVER_DEVICE": "cpu", "RAYSFL_GPU_REPORT": str(report)}
    cmd = [sys.executable, "-m", "pytest", f"tests/gpu/{test_file}", "-q", "-p", "no:cacheprovider"]
    cmd += ["-k", selection, "-o", "addopts="]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return done.stdout


def test_the_gpu_tests_pass_with_a_cpu_server(tmp_path):
    out = run_with_a_cpu_server("test_cuda_server.py", "[gas] or [splitfed_v1] or [fedavg]", tmp_path)
    assert "12 passed" in out, out[-2000:]  # 4 tests (the bfloat16 one too) x 3 methods
    syncs = json.loads((tmp_path / "gpu_syncs.json").read_text())
    assert sorted(syncs) == ["fedavg", "gas", "splitfed_v1"]
    assert syncs["gas"]["on_activations"]["calls"] > 0 and syncs["gas"]["on_activations"]["syncs"] == 0
    compared = json.loads((tmp_path / "gpu_vs_cpu.json").read_text())

    def losses(rows: list[dict]) -> list[float]:
        return [r["loss"] for r in rows]

    assert all(losses(v["cpu"]) == losses(v["server_device"]) for v in compared.values())  # cpu against cpu


def test_the_zoo_gpu_test_runs_with_a_cpu_server(tmp_path):
    """``tests/gpu/test_cuda_zoo.py`` for a residual net and a Transformer, in all three variants."""
    out = run_with_a_cpu_server("test_cuda_zoo.py", "resnet18-layer1 or vit_small-block1", tmp_path)
    assert "6 passed" in out, out[-2000:]
    found = json.loads((tmp_path / "gpu_zoo.json").read_text())
    assert sorted(found) == sorted(
        f"{cut}/{variant}"
        for cut in ("resnet18/layer1", "vit_small/block1")
        for variant in ("float32/contiguous", "float32/channels_last", "bfloat16/contiguous")
    )
    assert not any(found.values())  # the CPU kernels are deterministic: nothing reported
