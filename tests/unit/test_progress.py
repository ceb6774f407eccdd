"""The progress line: durations, emulated time that never runs backwards, ETA from the iteration count."""

import io
from pathlib import Path

from raysfl.metrics.progress import ProgressLine, format_duration


def test_format_duration():
    assert format_duration(5.2) == "5s"
    assert format_duration(65) == "1m05s"
    assert format_duration(3725) == "1h02m05s"
    assert format_duration(-3) == "0s"


def test_emulated_time_never_runs_backwards_and_eta_follows_the_iterations():
    out = io.StringIO()
    line = ProgressLine(total_iterations=3, every_s=0.0, stream=out)
    line.on_event({"t": 123.0, "version": 1})
    line.on_eval({"iteration": 2, "t": 120.0, "accuracy": 0.361})
    first, second = out.getvalue().splitlines()
    assert first.startswith("iter 1/3 | emulated 2m03s | acc - |")
    assert second.startswith("iter 2/3 | emulated 2m03s | acc 0.3610 |")
    assert "ETA ?" not in second
    line.on_eval({"iteration": 3, "t": 170.0, "accuracy": 0.52})
    assert out.getvalue().splitlines()[-1].startswith("iter 3/3 | emulated 2m50s | acc 0.5200 |")
    assert out.getvalue().splitlines()[-1].endswith("ETA 0s")


def test_the_iteration_never_runs_backwards_when_an_evaluation_arrives_late():
    out = io.StringIO()
    line = ProgressLine(total_iterations=60, every_s=0.0, stream=out)
    line.on_event({"t": 50.0, "version": 9})
    line.on_eval({"iteration": 0, "t": 0.0, "accuracy": 0.1})  # on Ray: the first evaluation, late
    assert out.getvalue().splitlines()[-1].startswith("iter 9/60 | emulated 50s | acc 0.1000 |")


def test_a_resumed_line_goes_on_from_the_checkpoint_and_times_only_what_is_left(monkeypatch):
    """After a resume it printed ``wall 0s`` and an ETA of 0 s at iteration 50 of 120: the iterations
    before the checkpoint counted as done in no time. It goes on from the checkpoint, not from the last
    evaluation before it (iteration 40 here, the checkpoint at 45)."""
    import raysfl.metrics.progress as progress

    clock = iter([0.0, 100.0, 200.0, 300.0, 990.0, 1000.0, 1010.0])  # 300 s to the checkpoint; resumed
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    before = ProgressLine(total_iterations=120, every_s=1e9, stream=io.StringIO())
    before.on_eval({"iteration": 40, "t": 600.0, "accuracy": 0.5})
    before.on_event({"t": 680.0, "version": 45})
    state = before.checkpoint(Path("unused"), "000045")
    assert state == {"iteration": 45, "t": 680.0, "accuracy": 0.5, "wall_s": 300.0}
    out = io.StringIO()
    line = ProgressLine(total_iterations=120, every_s=0.0, stream=out)
    line.resume(state, [{"iteration": 40, "t": 600.0, "accuracy": 0.5, "wall_s": 290.0}])
    line.on_eval({"iteration": 50, "t": 750.0, "accuracy": 0.6})
    assert out.getvalue().splitlines()[-1] == (
        "iter 50/120 | emulated 12m30s | acc 0.6000 | 0 events/s | wall 5m10s | ETA 2m20s"
    )


def test_a_line_resumed_from_an_older_checkpoint_goes_on_from_its_last_evaluation(monkeypatch):
    import raysfl.metrics.progress as progress

    clock = iter([990.0, 1000.0, 1010.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    out = io.StringIO()
    line = ProgressLine(total_iterations=120, every_s=0.0, stream=out)
    line.resume(None, [{"iteration": 40, "t": 600.0, "accuracy": 0.5, "wall_s": 300.0}])
    line.on_eval({"iteration": 50, "t": 750.0, "accuracy": 0.6})
    assert out.getvalue().splitlines()[-1].endswith("| wall 5m10s | ETA 1m10s")
