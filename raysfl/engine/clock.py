"""Clocks: virtual time only moves when an event is popped; the realtime clock also waits (STYLE §1.3)."""

from __future__ import annotations

import time


class VirtualClock:
    """Discrete-event time: ``advance(t)`` jumps to ``t``; it never goes back."""

    def __init__(self) -> None:
        self.now = 0.0

    def advance(self, t: float) -> None:
        """Move to virtual time ``t`` (seconds), waiting first if the clock is paced."""
        if t < self.now:
            raise RuntimeError(f"invariant broken: time went back from {self.now} to {t}")
        self.wait_until(t)
        self.now = t

    def wait_until(self, t: float) -> None:
        """Virtual clock: nothing to wait for."""


class RealtimeClock(VirtualClock):
    """Paces virtual time to the wall clock: emulated ``t`` happens at ``start + t / time_scale``.

    ``strict`` raises when the host falls more than ``tolerance_s`` behind; otherwise the run just lags.
    Runs with this clock are not deterministic: host speed decides what arrives first.
    """

    def __init__(self, time_scale: float = 1.0, strict: bool = False, tolerance_s: float = 1.0) -> None:
        super().__init__()
        self.time_scale = time_scale
        self.strict = strict
        self.tolerance_s = tolerance_s
        self.start_wall = time.monotonic()
        self.max_lag_s = 0.0
        self.retry_s = 0.02 * time_scale  # 20 ms of wall time, in emulated seconds

    def anchor(self) -> None:
        """Pace from now on: the current emulated time is due now (a run's start, or its resume)."""
        self.start_wall = time.monotonic() - self.now / self.time_scale

    def wait_until(self, t: float) -> None:
        """Sleep until the wall-clock moment of emulated time ``t``."""
        due = self.start_wall + t / self.time_scale
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
            return
        self.max_lag_s = max(self.max_lag_s, -delay)
        if self.strict and -delay > self.tolerance_s:
            raise RuntimeError(f"realtime clock: host is {-delay:.2f} s behind emulated time {t:.2f} s")

    def wall_for(self, t: float) -> float:
        """The wall-clock (monotonic) moment at which emulated time ``t`` is due."""
        return self.start_wall + t / self.time_scale
