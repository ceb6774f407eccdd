"""What a sweep trial reports to Ray Tune: every evaluation of its run, once, across resumes and restarts."""

import pyarrow.parquet as pq

from raysfl.engine import runner
from raysfl.scenario import scenario_from_dict
from raysfl.sweep.trial import TuneSink, tune_metrics
from tests.unit.engine.test_checkpoint_resume import crash_after, tiny


def test_a_trial_continued_from_a_checkpoint_reports_its_whole_curve(tmp_path):
    """A resumed sweep runs the trial in a new Tune run, whose result.json starts empty: the checkpoint's
    evaluations are reported first (before, Tune's history held only the part after the checkpoint)."""
    sc = scenario_from_dict(tiny("gas"))
    runner.run(sc, tmp_path / "full", backend="local")
    crashed = crash_after(tmp_path / "full", tmp_path / "crashed", "ckpt-000002.pt")
    reported: list[dict] = []
    runner.run(sc, crashed, backend="local", resume=True, extra_sinks=[TuneSink(reported.append)])
    metrics = pq.read_table(crashed / "metrics.parquet").to_pylist()
    assert len(metrics) == 5  # the evaluation before training and one per global iteration
    assert reported == [tune_metrics(m) for m in metrics]  # the checkpoint's rows with their first wall times


def test_an_evaluation_is_reported_once_whatever_the_attempts_repeat():
    """A restart after a lost worker rolls back to a checkpoint (or the start) and evaluates again what
    Tune already has: only evaluations past those are reported."""
    rows = [{"iteration": i, "t": 10.0 * i, "accuracy": 0.1 * i} for i in range(6)]
    reported: list[dict] = []
    sink = TuneSink(reported.append)
    for row in rows[:4]:  # the first attempt evaluates 0..3, then its pool dies
        sink.on_eval(row)
    sink.resume(None, rows[:2])  # back to a checkpoint after evaluation 1
    for row in rows[2:]:
        sink.on_eval(row)
    assert [r["global_iteration"] for r in reported] == [0, 1, 2, 3, 4, 5]
    sink.resume(None, [])  # a restart from the start (no checkpoint): the whole run again
    for row in rows:
        sink.on_eval(row)
    assert [r["global_iteration"] for r in reported] == [0, 1, 2, 3, 4, 5]
    fresh: list[dict] = []
    new_process = TuneSink(fresh.append)  # a resumed sweep's trial: a new process, from a checkpoint
    new_process.resume(None, rows[:3])
    new_process.on_eval(rows[3])
    assert [r["global_iteration"] for r in fresh] == [0, 1, 2, 3]


class _SinkWithState:
    """An extra sink that could be checkpointed and resumed, recording what the run asks of it."""

    def __init__(self) -> None:
        self.saved: list[str] = []
        self.resumed: list[tuple[object, int]] = []

    def on_event(self, row: dict) -> None:
        pass

    def on_eval(self, row: dict) -> None:
        pass

    def close(self) -> None:
        pass

    def checkpoint(self, ck_dir, tag: str) -> dict:
        self.saved.append(tag)
        return {"tag": tag}

    def resume(self, state: object, evals: list[dict]) -> None:
        self.resumed.append((state, len(evals)))


def test_extra_sinks_are_never_saved_in_checkpoints_and_resume_with_no_state(tmp_path):
    """The run's own logs are checkpointed by class name: an extra sink saved there could overwrite the
    state of a run's sink of the same class, or seal files beside the run's own."""
    sc = scenario_from_dict(tiny("gas"))
    first = _SinkWithState()
    runner.run(sc, tmp_path / "full", backend="local", extra_sinks=[first])
    assert first.saved == [] and first.resumed == []
    crashed = crash_after(tmp_path / "full", tmp_path / "crashed", "ckpt-000002.pt")
    again = _SinkWithState()
    runner.run(sc, crashed, backend="local", resume=True, extra_sinks=[again])
    assert again.saved == [] and again.resumed == [(None, 3)]  # the evaluations up to the checkpoint
