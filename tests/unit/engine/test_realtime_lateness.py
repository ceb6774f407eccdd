"""Realtime mode says when the host fell behind the wall clock, and by how much, instead of stretching
emulated time silently."""

import pytest

from raysfl.engine import runner
from raysfl.engine.dispatch import LocalDispatcher
from raysfl.engine.loop import Totals
from raysfl.engine.runner import realtime_late_note, run
from raysfl.scenario import scenario_from_dict
from tests.scenarios import TINY_GAS as TINY


def test_a_local_realtime_run_that_falls_behind_says_so(tmp_path, capsys):
    """The local backend runs the concurrent clients' paced calls in turn, so a run meant to take 0.5 wall
    seconds falls seconds behind: the summary records it and the note names the cause."""
    virtual = run(scenario_from_dict(TINY), tmp_path / "virtual", backend="local")
    scale = virtual["emulated_s"] / 0.5
    sc = scenario_from_dict(TINY, ['engine.clock="realtime"', f"engine.time_scale={scale}"])
    capsys.readouterr()
    summary = run(sc, tmp_path / "realtime", backend="local")
    err = capsys.readouterr().err
    assert summary["realtime_max_lag_s"] > 0.5
    assert summary["realtime_postponed_arrivals"] == 0 and summary["realtime_max_late_s"] == 0.0  # all there
    assert (
        f"realtime: the host did not keep up with engine.time_scale = {scale:g}: events were released up "
        in err
    )
    assert "calls that share a pool ran in turn (the note above)" in err


def test_the_late_note_states_late_arrivals_in_emulated_and_wall_seconds():
    sc = scenario_from_dict(TINY, ['engine.clock="realtime"', "engine.time_scale=2", "engine.pools=4"])
    late = Totals(postponed=3, late_max_s=5.0, lag_max_s=0.01)
    assert realtime_late_note(sc, "ray", late) == (
        "realtime: the host did not keep up with engine.time_scale = 2: 3 arrival(s) came late, by up to 5 "
        "emulated s (2.5 wall s); events were released up to 0.01 wall s late. Emulated times are stretched "
        "by that; a smaller engine.time_scale asks less of the host."
    )
    assert realtime_late_note(sc, "ray", Totals(postponed=3, late_max_s=0.9, lag_max_s=0.4)) == ""  # < 0.5 s
    assert realtime_late_note(scenario_from_dict(TINY), "ray", late) == ""  # the virtual clock


class _ArrivesLate(LocalDispatcher):
    """The local backend, with every awaited value arriving three looks late (a slow worker, as on Ray)."""

    LOOKS = 3

    def __init__(self, inner: LocalDispatcher) -> None:
        self.__dict__.update(inner.__dict__)
        self.looks: dict = {}

    def ready(self, slot) -> bool:
        self.looks[slot] = self.looks.get(slot, 0) + 1
        return self.looks[slot] > self.LOOKS and super().ready(slot)


def test_each_late_arrival_counts_once_with_how_late_it_came(tmp_path, monkeypatch):
    """A value postponed three times is one late arrival (each 20 ms retry counted as one), late by the
    three retries: 3 × 0.02 s × time_scale of emulated time."""
    made: list[_ArrivesLate] = []

    def arriving_late(prep, server_device=None):
        made.append(_ArrivesLate(runner_local(prep, server_device)))
        return made[-1]

    runner_local = runner.local_dispatcher
    monkeypatch.setattr(runner, "local_dispatcher", arriving_late)
    scale = 50.0
    sc = scenario_from_dict(TINY, ['engine.clock="realtime"', f"engine.time_scale={scale}"])
    summary = run(sc, tmp_path / "late", backend="local")
    (dispatcher,) = made
    awaited = [slot for slot, looks in dispatcher.looks.items() if looks > _ArrivesLate.LOOKS]
    assert awaited and summary["realtime_postponed_arrivals"] == len(awaited)
    assert summary["realtime_max_late_s"] == pytest.approx(3 * 0.02 * scale)


def test_an_arrival_postponed_across_a_checkpoint_is_late_from_its_first_due_time(tmp_path, monkeypatch):
    """Checkpoints keep each postponed arrival's first due time: after a resume, an arrival that was
    already retried at the checkpoint counts as late from when it was first due. Before, its lateness
    started again at the resume: 3 retries instead of the 4 or more it had."""
    from raysfl.engine.checkpoint import checkpoint_files
    from raysfl.engine.snapshot import load_tree, rebuild
    from tests.unit.engine.test_checkpoint_resume import crash_after

    def arriving_late(prep, server_device=None):
        return _ArrivesLate(runner_local(prep, server_device))  # each run (and the resume) looks afresh

    runner_local = runner.local_dispatcher
    monkeypatch.setattr(runner, "local_dispatcher", arriving_late)
    scale = 50.0
    sc = scenario_from_dict(
        TINY,
        ['engine.clock="realtime"', f"engine.time_scale={scale}", "engine.checkpoint_every=1"],
    )
    run(sc, tmp_path / "full", backend="local")
    retry = 0.02 * scale  # emulated seconds between two looks
    pending = {}
    for path in checkpoint_files(tmp_path / "full" / "checkpoints"):
        due = rebuild(load_tree(path)["due"])
        if due:
            pending[path.name] = due
    assert pending, "no checkpoint was taken while an arrival was postponed"
    first, due = next(iter(pending.items()))
    crashed = crash_after(tmp_path / "full", tmp_path / "crashed", first)
    resumed = run(sc, crashed, backend="local", resume=True)
    assert resumed["resumed_from"] == first
    assert resumed["realtime_max_late_s"] >= 4 * retry - 1e-9  # ≥ 1 retry before the checkpoint, 3 after
