"""``engine.precision = "bfloat16"`` in whole runs: other numbers, the same events, still deterministic.

The option changes what the model computes (bfloat16 convolutions and matmuls), not what the simulation
counts: FLOPs, bytes and so the virtual times and the event order are those of a float32 run. A bfloat16
run is reproducible bit for bit, in-process, on Ray pools and across a crash and resume.
"""

import pyarrow.parquet as pq
import pytest

from raysfl.cli import main
from raysfl.config import apply_overrides
from raysfl.engine.checkpoint import differences, fingerprint
from raysfl.engine.runner import run
from raysfl.models.precision import EMULATED_BFLOAT16
from raysfl.scenario import scenario_from_dict, scenario_to_dict
from tests.unit.engine.test_checkpoint_resume import METHODS as METHODS_ALL
from tests.unit.engine.test_checkpoint_resume import run_crash_and_resume, tiny
from tests.unit.engine.test_memory_format import METHODS, TINY


def metrics(out):
    rows = pq.read_table(out / "metrics.parquet").to_pylist()
    return [(r["iteration"], r["t"], r["accuracy"], r["loss"]) for r in rows]


def events(out):
    return [(e["t"], e["kind"], e["client"]) for e in pq.read_table(out / "events.parquet").to_pylist()]


def scenario(method: str, precision: str, *overrides: str):
    doc = {**TINY, "algorithm": METHODS[method]}
    return scenario_from_dict(doc, [f"engine.precision={precision}", *overrides])


@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_bfloat16_run_has_float32s_events_and_close_metrics(tmp_path, method):
    runs = {}
    for precision in ("float32", "bfloat16", "bfloat16"):
        out = tmp_path / f"{precision}-{len(runs)}"
        run(scenario(method, precision), out, backend="local")
        runs[out.name] = (metrics(out), events(out))
    (ref, ref_ev), (low, low_ev), (again, again_ev) = runs.values()
    assert (again, again_ev) == (low, low_ev)  # deterministic
    assert low_ev == ref_ev  # the same work: same events at the same virtual times
    assert [r[:2] for r in low] == [r[:2] for r in ref]
    assert [r[3] for r in low] != [r[3] for r in ref]  # but computed in another precision
    for (_, _, acc_low, loss_low), (_, _, acc_ref, loss_ref) in zip(low, ref, strict=True):
        assert abs(acc_low - acc_ref) <= 0.1
        assert loss_low == pytest.approx(loss_ref, rel=0.05)


def test_bfloat16_runs_are_identical_in_process_and_on_ray_pools(ray_session, tmp_path):
    run(scenario("gas", "bfloat16"), tmp_path / "local", backend="local")
    run(scenario("gas", "bfloat16", "engine.pools=2"), tmp_path / "ray", backend="ray")
    assert metrics(tmp_path / "ray") == metrics(tmp_path / "local")
    assert events(tmp_path / "ray") == events(tmp_path / "local")


def test_a_bfloat16_run_resumes_to_the_same_metrics_and_events(tmp_path):
    """The float32 weights and optimizer buffers are what a checkpoint holds; the hooks come with the model
    every process builds: crash after the first checkpoint, resume, end where the uninterrupted run ends."""
    doc = apply_overrides(tiny("gas", precision="bfloat16"), ["metrics.tensorboard=false"])
    run_crash_and_resume(scenario_from_dict(doc), tmp_path)


def test_a_cpu_without_bfloat16_instructions_gets_a_note(tmp_path, monkeypatch, capsys):
    """The probe of the CPU is replaced (this machine may have the instructions); the run itself is real."""
    import raysfl.engine.runner as runner

    for native, expected in ((True, ""), (False, EMULATED_BFLOAT16)):
        monkeypatch.setattr(runner, "native_bfloat16", lambda native=native: native)
        sc = scenario("fedavg", "bfloat16", "train.global_iterations=1")
        run(sc, tmp_path / str(native), backend="local")
        err = capsys.readouterr().err
        assert (expected in err) if expected else EMULATED_BFLOAT16 not in err


def test_the_fingerprint_holds_the_precision_only_when_it_is_not_float32():
    """A float32 scenario keeps the fingerprint it had before the option existed (old checkpoints resume);
    a bfloat16 one differs, while other engine fields (pools) still do not count."""
    doc = scenario_to_dict(scenario_from_dict(tiny("gas")))
    stored_before = {**doc, "engine": {k: v for k, v in doc["engine"].items() if k != "precision"}}
    assert fingerprint(stored_before) == fingerprint(doc)
    low = {**doc, "engine": {**doc["engine"], "precision": "bfloat16"}}
    assert fingerprint(low) != fingerprint(doc)
    assert differences(doc, low) == ["engine.precision: 'float32' != 'bfloat16'"]
    assert differences(doc, stored_before) == []
    assert fingerprint({**low, "engine": {**low["engine"], "pools": 3}}) == fingerprint(low)


def test_a_run_resumes_only_in_its_own_precision(tmp_path, capsys):
    doc = apply_overrides(tiny("fedavg", precision="bfloat16"), ["metrics.tensorboard=false"])
    run(scenario_from_dict(doc), tmp_path / "run", backend="local")
    code = main(["run", "--resume", str(tmp_path / "run"), "engine.precision=float32", "--backend", "local"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "written by another scenario" in err and "engine.precision: 'bfloat16' != 'float32'" in err


@pytest.mark.parametrize("name", METHODS_ALL)
def test_every_method_runs_in_bfloat16_with_float32s_events(tmp_path, name):
    """However a method calls its model (parts, slices, the full stack, per-layer loops), a bfloat16 run
    does the same work as the float32 one and reaches other numbers."""
    outs = {}
    for precision in ("float32", "bfloat16"):
        doc = tiny(name, precision=precision, checkpoint_every=0)
        doc = apply_overrides(doc, ["metrics.tensorboard=false"])
        run(scenario_from_dict(doc), tmp_path / precision, backend="local")
        outs[precision] = tmp_path / precision
    assert events(outs["bfloat16"]) == events(outs["float32"])
    assert [r[3] for r in metrics(outs["bfloat16"])] != [r[3] for r in metrics(outs["float32"])]
