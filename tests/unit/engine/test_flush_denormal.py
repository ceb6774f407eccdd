"""``engine.flush_denormal``: subnormal floats flushed to zero in the thread of every host call, nowhere else.

The mode is a per-thread CPU register. These tests state what it does to a subnormal product, that a host
call turns it on and back off, that torch's worker threads keep IEEE arithmetic (so one process and Ray
give the same numbers), that every call of both roles runs flushed on either backend, and that a run's
numbers stay those of the unflushed run where no subnormal value matters.
"""

import subprocess
import sys
import textwrap

import pytest
import torch

from raysfl.config import ConfigError
from raysfl.engine import float_mode
from raysfl.engine.runner import run
from raysfl.scenario import scenario_from_dict
from tests.unit.engine.test_checkpoint_resume import rows, tiny

PROBE = "tests.unit.engine.flush_probe:SPEC"


def _supported() -> bool:
    try:
        float_mode.check_supported(True)
    except ConfigError:
        return False
    return True


needs_flush = pytest.mark.skipif(not _supported(), reason="this CPU cannot flush subnormal floats")


@needs_flush
def test_a_subnormal_product_is_zero_inside_and_itself_outside():
    x = torch.tensor([float_mode.SUBNORMAL, 1e-30, 2.0])
    with float_mode.flushed(True):
        assert float_mode.flushing()
        inside = (x * 1.0).tolist()
        with float_mode.flushed(True):  # nested: still on, and on again after the inner exit
            pass
        assert float_mode.flushing()
    assert not float_mode.flushing()
    outside = (x * 1.0).tolist()
    assert inside[0] == 0.0 and inside[1:] == pytest.approx([1e-30, 2.0], rel=1e-6)
    assert outside[0] == pytest.approx(1e-39, rel=1e-3) and outside[0] != 0.0
    with float_mode.flushed(False):
        assert not float_mode.flushing()


@needs_flush
def test_workers_started_before_keep_ieee_arithmetic():
    """In a fresh process: torch's second thread, started before the flushed block, keeps subnormals; the
    calling thread's share is flushed. Started inside the block, it would copy the flushed mode."""
    code = textwrap.dedent(
        """
        import torch
        from raysfl.engine import float_mode
        x = torch.full((1 << 22,), float_mode.SUBNORMAL)
        float_mode.start_workers(2)
        torch.set_num_threads(2)
        with float_mode.flushed(True):
            kept = int(((x * 1.0) != 0).sum())
        print(kept, x.numel())
        """
    )
    cmd = [sys.executable, "-c", code]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    kept, total = map(int, out.stdout.split())
    assert 0 < kept < total  # the worker's part kept, the calling thread's part flushed


def test_the_option_is_a_bool_named_in_its_error():
    with pytest.raises(ConfigError, match=r"engine\.flush_denormal"):
        scenario_from_dict({"engine": {"flush_denormal": "yes"}})
    assert scenario_from_dict({}).engine.flush_denormal is False
    float_mode.check_supported(False)  # never refuses the default


@needs_flush
@pytest.mark.parametrize("flush", [False, True])
def test_every_host_call_runs_in_the_asked_mode_in_process(tmp_path, flush):
    """The probe method raises in any client or server call made in the other mode; the run finishes."""
    summary = run(
        scenario_from_dict(tiny(PROBE, flush_denormal=flush, checkpoint_every=0)),
        tmp_path / "run",
        backend="local",
    )
    assert summary["global_iterations"] == 4
    assert not float_mode.flushing()  # the test's own thread is back to IEEE arithmetic


@needs_flush
def test_every_host_call_runs_flushed_on_ray_and_gives_the_local_numbers(ray_session, tmp_path):
    doc = tiny(PROBE, flush_denormal=True, checkpoint_every=0, pools=2)
    run(scenario_from_dict(doc), tmp_path / "ray", backend="ray")
    run(scenario_from_dict(doc), tmp_path / "local", backend="local")
    plain = tiny(PROBE, flush_denormal=False, checkpoint_every=0)
    run(scenario_from_dict(plain), tmp_path / "ieee", backend="local")
    local = rows(tmp_path / "local" / "metrics.parquet")
    assert rows(tmp_path / "ray" / "metrics.parquet") == local
    assert rows(tmp_path / "ray" / "events.parquet") == rows(tmp_path / "local" / "events.parquet")
    # nothing in this run is subnormal: flushing changes no number of it
    assert rows(tmp_path / "ieee" / "metrics.parquet") == local
