"""Every registered method's numbers on one tiny scenario, pinned exactly.

Refactors of the method API must not move a single digit: each method runs the same tiny synthetic
scenario on the local backend and its evaluation rows, event count and traffic are compared with the
values recorded in ``pinned_metrics.json``. After an *intended* change of numbers, rewrite the method's
pins with ``RAYSFL_REPIN=1 python -m pytest -q tests/unit/algorithms/test_pinned_metrics.py -k NAME`` and say
why in the commit.

The last bits of CPU floating point depend on the processor (torch and numpy pick kernels by its vector
instructions): each method's pins record the machine they were taken on (``__machine__``; older pins, the
file's), and the comparison is exact there; on another machine, floats must agree to a relative 1e-5 or an
absolute 1e-6 (the tiny runs differ there in the 7th digit, float32's resolution) and everything else
(counts, bytes, integers, strings) exactly.
"""

from __future__ import annotations

import json
import math
import os
import platform
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch

from raysfl.algorithms import ALGORITHMS
from raysfl.engine import runner
from raysfl.scenario import scenario_from_dict

PINS = Path(__file__).with_name("pinned_metrics.json")
AUX = {"cse_fsl", "fsl_an"}
PLAIN_SGD = {"fedasmu", "fedssmu", "lightweight_fedsl", "fedsl"}
# cse_fsl: a client's 60 samples make 4 minibatches of 16, fewer than the default h = 5 (no upload at all)
PARAMS = {"gas": {"q_s": 3, "q_c": 3}, "cse_fsl": {"h": 2}}


def tiny(name: str) -> dict:
    """The fixed scenario: synthetic data, 5 clients (3 active), LeNet-5, 4 global iterations."""
    train = {"global_iterations": 4, "local_iterations": 2, "batch_size": 16, "eval_every": 1}
    if name in PLAIN_SGD:
        train |= {"optimizer": "sgd", "momentum": 0.0}
    return {
        "name": f"pin-{name}",
        "seed": 3,
        "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 300, "synthetic_test": 60},
        "model": {"name": "lenet5", **({"aux": "mlp"} if name in AUX else {})},
        "federation": {"num_clients": 5, "active_clients": 3},
        "train": train,
        "algorithm": {"name": name, **({"params": PARAMS[name]} if name in PARAMS else {})},
        "metrics": {"progress": False, "tensorboard": False},
    }


def measure(name: str, out: Path) -> dict:
    """The numbers pinned for one method: its evaluation rows (no wall time) and the run's totals."""
    return measure_scenario(tiny(name), out)


def measure_scenario(scenario: dict, out: Path) -> dict:
    """:func:`measure` of any scenario given as data (a variant of :func:`tiny`)."""
    summary = runner.run(scenario_from_dict(scenario), out, backend="local")
    table = pq.read_table(out / "metrics.parquet")
    evals = [
        {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items() if k != "wall_s"}
        for row in table.to_pylist()
    ]
    totals = {k: summary[k] for k in ("events", "bytes_up", "bytes_down", "global_iterations", "stop_reason")}
    return {"evals": evals, "totals": totals}


MACHINE = "__machine__"
FLOAT_RTOL = 1e-5
FLOAT_ATOL = 1e-6  # differences of float32 losses (FedASMU's rewards) keep only their absolute error


def machine() -> dict[str, str]:
    """What decides the last bits of the numbers: the processor, torch's vector instructions, torch."""
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        lines = cpuinfo.read_text().splitlines()
        names = [ln.split(":", 1)[1] for ln in lines if ln.startswith("model name")]
        model = names[0].strip() if names else ""
    return {
        "cpu": model or platform.processor(),
        "capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
    }


def mismatch(got: object, want: object, exact: bool, path: str = "") -> str | None:
    """Where ``got`` first differs from ``want`` (None: they match): floats within FLOAT_RTOL unless exact."""
    if isinstance(want, dict) and isinstance(got, dict):
        if set(got) != set(want):
            return f"{path}: keys {sorted(set(got) ^ set(want))} differ"
        pairs = [(got[k], want[k], f"{path}.{k}") for k in want]
    elif isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return f"{path}: {len(got)} items, pinned {len(want)}"
        pairs = [(g, w, f"{path}[{i}]") for i, (g, w) in enumerate(zip(got, want, strict=True))]
    elif not exact and isinstance(want, float) and isinstance(got, float):
        close = math.isclose(got, want, rel_tol=FLOAT_RTOL, abs_tol=FLOAT_ATOL)
        return None if close else f"{path}: {got!r} != {want!r}"
    else:
        return None if got == want and type(got) is type(want) else f"{path}: {got!r} != pinned {want!r}"
    return next((m for g, w, p in pairs if (m := mismatch(g, w, exact, p)) is not None), None)


def _pins() -> dict:
    return json.loads(PINS.read_text()) if PINS.exists() else {}


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_metrics_of_every_method_are_pinned(name, tmp_path):
    got = json.loads(json.dumps(measure(name, tmp_path / name)))  # the JSON round trip the pins went through
    if os.environ.get("RAYSFL_REPIN"):
        pins = _pins()
        pins[name] = {**got, MACHINE: machine()}  # a method re-pinned alone keeps its own machine
        PINS.write_text(json.dumps(dict(sorted(pins.items())), indent=1) + "\n")
    pinned = _pins()
    assert name in pinned, f"{name} has no pinned numbers; run with RAYSFL_REPIN=1 once and commit them"
    want = dict(pinned[name])
    exact = want.pop(MACHINE, pinned.get(MACHINE)) == machine()  # the file's machine for older pins
    where = mismatch(got, want, exact)
    assert where is None, f"{name} moved ({'exact' if exact else f'rtol {FLOAT_RTOL}'} comparison): {where}"


def test_the_comparison_is_exact_on_the_pinning_machine_and_close_elsewhere():
    row = {"t": 0.7344778795222676, "events": 3, "rows": [2.3047831217447916]}
    last_bit = {"t": 0.7344778795222675, "events": 3, "rows": [2.3047828674316406]}
    assert mismatch(row, row, exact=True) is None
    assert mismatch(last_bit, row, exact=True) == ".t: 0.7344778795222675 != pinned 0.7344778795222676"
    assert mismatch(last_bit, row, exact=False) is None  # another processor's last bits
    assert mismatch({**row, "t": 0.74}, row, exact=False) == ".t: 0.74 != 0.7344778795222676"
    assert mismatch({**row, "t": 0.73449}, row, exact=False) is not None  # 1.6e-5 relative: too far
    assert mismatch({**row, "events": 4}, row, exact=False) == ".events: 4 != pinned 3"  # counts stay exact
    assert mismatch({**row, "events": 3.0}, row, exact=False) is not None  # so do their types
    assert mismatch({"t": 0.7}, row, exact=False) == ": keys ['events', 'rows'] differ"
