"""The server on a real GPU: every method, run with ``engine.server_device = "cuda"`` on the local backend.

Skipped where torch sees no GPU (CI, the development machines); run on a GPU machine with
``python -m pytest tests/gpu``. ``RAYSFL_TEST_SERVER_DEVICE=cpu`` runs the same tests with a CPU server (a dry
run of this file, whose synchronisation audit then counts nothing). With ``RAYSFL_GPU_REPORT=DIR`` the
audit writes what it counted to ``DIR/gpu_syncs.json`` and the CPU/GPU comparison to ``DIR/gpu_vs_cpu.json``.

What is checked, per method:
- a run on the GPU resumed from its first checkpoint ends bitwise like the uninterrupted run (the server's
  CUDA kernels are deterministic: :func:`raysfl.engine.hosts.deterministic_cuda`), and a second run of the
  same scenario gives the same metrics;
- the GPU run's metrics agree with a CPU server's to float rounding: the same event times and bytes, the
  initial evaluation's loss to 1e-5, the last one's to 1e-3 (first H200 run: 2.8e-8 and at most 1.1e-7,
  but 2.6e-5 for GAS, whose generated activations come from the device's own random stream);
- ``engine.precision = "bfloat16"`` on the server's device: deterministic across a resume, float32's events;
- the synchronisation audit (``torch.cuda.set_sync_debug_mode``, :class:`SyncAudit`): a per-minibatch
  server call waits for the device only to copy back the gradients it produces (and a Cholesky flag), never
  to copy a tensor in; other calls only for what they return and the model they read back; an evaluation as
  often with 4 test batches as with 1 (docs/architecture.md, "What runs where", lists the reads per call).
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from raysfl.engine import runner
from raysfl.engine.hosts import ServerHost, build_model
from raysfl.scenario import scenario_from_dict
from tests.unit.engine.test_checkpoint_resume import METHODS, rows, run_crash_and_resume, tiny

DEVICE = os.environ.get("RAYSFL_TEST_SERVER_DEVICE", "cuda")
REPORT = os.environ.get("RAYSFL_GPU_REPORT")
pytestmark = pytest.mark.skipif(
    DEVICE == "cuda" and not torch.cuda.is_available(), reason="torch sees no CUDA device"
)
# common/evaluate.py reads int(correct), float(loss_sum), int(aux_correct); a split method's read of its
# training-loss sum fits in the model allowance of SyncAudit
EVALUATION_READS = 3


def _report(name: str, key: str, value: Any) -> None:
    """Add ``value`` under ``key`` to ``$RAYSFL_GPU_REPORT/name`` (a JSON object), when that is set."""
    if not REPORT:
        return
    path = Path(REPORT) / name
    doc = json.loads(path.read_text()) if path.exists() else {}
    doc[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def scenario(name: str, device: str, eval_batch_size: int = 16, **engine: Any):
    """The checkpoint tests' tiny run of ``name`` with its server on ``device``; 4 test batches, not 1."""
    doc = tiny(name, server_device=device, **engine)
    doc["train"]["eval_batch_size"] = eval_batch_size
    return scenario_from_dict(doc)


@pytest.mark.parametrize("name", METHODS)
def test_a_gpu_run_is_deterministic_and_resumes_exactly(name, tmp_path):
    sc = scenario(name, DEVICE)
    full, _ = run_crash_and_resume(sc, tmp_path)
    assert full["placement"]["device"] == DEVICE
    again = runner.run(sc, tmp_path / "again", backend="local")
    assert rows(tmp_path / "again" / "metrics.parquet") == rows(tmp_path / "full" / "metrics.parquet")
    assert again["final_accuracy"] == full["final_accuracy"]


def _close(a: float | None, b: float | None, rel: float) -> bool:
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return (a is None or math.isnan(a)) == (b is None or math.isnan(b))
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


@pytest.mark.parametrize("name", ["gas", "fedavg", "splitfed_v1", "minibatch_sfl"])
def test_bfloat16_on_the_server_device_is_deterministic_and_keeps_the_events(name, tmp_path):
    """``engine.precision = "bfloat16"``: the server's layers open their autocast regions on its device
    (CUDA autocast on a GPU), the pools' on the CPU. A resumed run ends like the uninterrupted one, and the
    run has float32's events at float32's times, with other losses."""
    run_crash_and_resume(scenario(name, DEVICE, precision="bfloat16"), tmp_path / "bf16")
    runner.run(scenario(name, DEVICE, checkpoint_every=0), tmp_path / "fp32", backend="local")
    low, ref = (pq.read_table(tmp_path / d / "metrics.parquet").to_pylist() for d in ("bf16/full", "fp32"))
    assert [(r["iteration"], r["t"], r["bytes_up"]) for r in low] == [
        (r["iteration"], r["t"], r["bytes_up"]) for r in ref
    ]
    assert [r["loss"] for r in low] != [r["loss"] for r in ref]
    assert all(_close(a["loss"], b["loss"], 0.05) for a, b in zip(low, ref, strict=True))


@pytest.mark.parametrize("name", METHODS)
def test_gpu_and_cpu_servers_agree_to_rounding(name, tmp_path):
    on = []
    for i, dev in enumerate(("cpu", DEVICE)):
        runner.run(scenario(name, dev, checkpoint_every=0), tmp_path / f"{i}-{dev}", backend="local")
        on.append(pq.read_table(tmp_path / f"{i}-{dev}" / "metrics.parquet").to_pylist())
    cpu, dev = on
    _report("gpu_vs_cpu.json", name, {"cpu": cpu, "server_device": dev})
    assert [(r["iteration"], r["t"], r["bytes_up"]) for r in cpu] == [
        (r["iteration"], r["t"], r["bytes_up"]) for r in dev
    ]
    assert _close(cpu[0]["loss"], dev[0]["loss"], 1e-5), (cpu[0]["loss"], dev[0]["loss"])
    assert _close(cpu[-1]["loss"], dev[-1]["loss"], 1e-3), (cpu[-1]["loss"], dev[-1]["loss"])


# Calls made once per minibatch (the hot path); every other call runs once per job, round or evaluation.
HOT_CALLS = ("on_activations", "on_smashed", "step", "iteration", "gradient")


def _arrays(obj: Any, floating: bool = False) -> int:
    """Tensors and numpy arrays in ``obj`` (in containers); ``floating``: only floating-point ones."""
    if isinstance(obj, torch.Tensor):
        return int(obj.is_floating_point() or not floating)
    if isinstance(obj, np.ndarray):
        return int(obj.size > 1 and (np.issubdtype(obj.dtype, np.floating) or not floating))
    if isinstance(obj, dict):
        return sum(_arrays(v, floating) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_arrays(v, floating) for v in obj)
    return 0


def model_tensors(sc: Any) -> int:
    """Parameters and buffers of the scenario's split model (client, server and auxiliary head)."""
    model = build_model(runner.prepare(sc).setup)
    parts = [m for m in (model.client, model.server, model.aux) if m is not None]
    return sum(len(m.state_dict()) for m in parts)


class SyncAudit:
    """Counts, per server call, the device synchronisations torch reports and where in Python they happen.

    What a call may wait for: a hot call (:data:`HOT_CALLS`), one gradient copied back per activation batch
    it receives (its floating-point tensors; labels and masks are integers) and the flag of each Cholesky
    factorisation; host-to-device copies never wait (``common/device.py: to_device``). Any other call, the
    tensors it returns and at most one read per tensor of the model (a model read back for host-side
    averaging), plus an evaluation's sums.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, model_tensors: int) -> None:
        self.calls: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.sites: dict[str, Counter] = defaultdict(Counter)
        call, cholesky_ex = ServerHost.call, torch.linalg.cholesky_ex
        factorisations = [0]

        def counted_cholesky(*args: Any, **kwargs: Any) -> Any:
            factorisations[0] += 1
            return cholesky_ex(*args, **kwargs)

        def audited(host: ServerHost, method: str, *args: Any, **kwargs: Any) -> Any:
            factorisations[0] = 0
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                if DEVICE == "cuda":  # a CPU dry run checks the plumbing; it counts no syncs
                    torch.cuda.set_sync_debug_mode("warn")
                try:
                    result = call(host, method, *args, **kwargs)
                finally:
                    if DEVICE == "cuda":
                        torch.cuda.set_sync_debug_mode("default")
            syncs = [w for w in caught if "synchroniz" in str(w.message)]
            for w in syncs:
                self.sites[method][f"{Path(w.filename).name}:{w.lineno}"] += 1
            if method in HOT_CALLS:
                allowed = _arrays(args, floating=True) + factorisations[0]
            else:
                allowed = _arrays(result) + model_tensors + factorisations[0]
                allowed += EVALUATION_READS if method == "evaluate" else 0
            self.calls[method].append({"syncs": len(syncs), "allowed": allowed})
            return result

        monkeypatch.setattr(ServerHost, "call", audited)
        monkeypatch.setattr(torch.linalg, "cholesky_ex", counted_cholesky)

    def take(self) -> tuple[dict[str, Any], list[int]]:
        """A summary per method, and the syncs of each evaluation; then start counting afresh."""
        summary = {
            m: {
                "calls": len(c),
                "syncs": sum(x["syncs"] for x in c),
                "max_over_allowed": max(x["syncs"] - x["allowed"] for x in c),
                "sites": dict(self.sites[m]),
            }
            for m, c in self.calls.items()
        }
        evaluations = [x["syncs"] for x in self.calls["evaluate"]]
        self.calls.clear()
        self.sites.clear()
        return summary, evaluations


@pytest.mark.parametrize("name", METHODS)
def test_server_calls_wait_for_the_device_only_for_what_they_return(name, tmp_path, monkeypatch):
    sc = scenario(name, DEVICE, checkpoint_every=0)
    audit = SyncAudit(monkeypatch, model_tensors(sc))
    runner.run(sc, tmp_path / "run", backend="local")
    summary, evaluations = audit.take()
    _report("gpu_syncs.json", name, summary)
    over = {m: s for m, s in summary.items() if s["max_over_allowed"] > 0}
    assert not over, f"server calls that wait for the device more than they may: {over}"
    # an evaluation waits as often with 4 test batches as with 1: no read per batch
    one_batch_sc = scenario(name, DEVICE, eval_batch_size=64, checkpoint_every=0)
    runner.run(one_batch_sc, tmp_path / "one", backend="local")
    _, one_batch = audit.take()
    assert evaluations == one_batch
