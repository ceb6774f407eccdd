import pytest

from raysfl.algorithms.actions import Event
from raysfl.engine.clock import RealtimeClock, VirtualClock
from raysfl.engine.queue import EventQueue


def test_queue_orders_by_time_then_scheduling_sequence():
    q = EventQueue()
    for t, kind in [(2.0, "b"), (1.0, "a"), (2.0, "c"), (0.5, "z"), (2.0, "d")]:
        q.push(Event(t, kind))
    assert [q.pop().kind for _ in range(5)] == ["z", "a", "b", "c", "d"]


def test_queue_snapshot_restores_the_same_order():
    q = EventQueue()
    for i, t in enumerate([3.0, 1.0, 2.0, 1.0]):
        q.push(Event(t, f"e{i}"))
    snap = q.snapshot()
    first = [q.pop().kind for _ in range(4)]
    q2 = EventQueue()
    q2.restore(snap)
    assert [q2.pop().kind for _ in range(4)] == first == ["e1", "e3", "e2", "e0"]


def test_queue_rejects_bad_times():
    with pytest.raises(RuntimeError, match="finite"):
        EventQueue().push(Event(float("nan"), "x"))
    with pytest.raises(RuntimeError, match="finite"):
        EventQueue().push(Event(-1.0, "x"))


def test_virtual_clock_never_goes_back():
    c = VirtualClock()
    c.advance(2.0)
    with pytest.raises(RuntimeError, match="went back"):
        c.advance(1.0)


def test_realtime_clock_paces_to_the_wall(monkeypatch):
    slept = []
    monkeypatch.setattr("raysfl.engine.clock.time.sleep", slept.append)
    clock = RealtimeClock(time_scale=10.0)
    clock.start_wall = 1000.0
    monkeypatch.setattr("raysfl.engine.clock.time.monotonic", lambda: 1000.5)
    clock.advance(20.0)  # due at 1000 + 20/10 = 1002 → sleep 1.5 s
    assert slept == [pytest.approx(1.5)]


def test_a_realtime_clock_anchored_at_a_resume_paces_from_there(monkeypatch):
    """A run paces from the moment its coordinator starts (or resumes), not from when its clock was built:
    the set-up, or a checkpoint's restore, counted as lag before."""
    slept = []
    monkeypatch.setattr("raysfl.engine.clock.time.sleep", slept.append)
    clock = RealtimeClock(time_scale=10.0)
    clock.now = 20.0  # restored from a checkpoint taken at emulated 20 s
    monkeypatch.setattr("raysfl.engine.clock.time.monotonic", lambda: 5000.0)
    clock.anchor()
    clock.advance(20.0)  # due now
    clock.advance(30.0)  # due 10 emulated s = 1 wall s later
    assert slept == [pytest.approx(1.0)] and clock.max_lag_s == 0.0
