"""An opt-in wall-time profiler: named, nested sections with exclusive times, one per process.

Off by default. :data:`ACTIVE` is ``None`` and :func:`section` returns one shared null context, so an
instrumented call site costs a global lookup and a comparison; nothing else runs. When a process enables a
:class:`Profiler` (:func:`enable`; the ``benchmarks/profile_*.py`` scripts do, and the Ray actors when the
driver asks them to), each section reads ``time.perf_counter`` on entry and exit. Timers never touch tensors,
random streams or the order of anything, so a profiled run computes the same numbers as an unprofiled one.

Sections nest: a section's *exclusive* time is its wall time minus the time of the sections opened inside
it, so the exclusive times of every section of a process plus the time outside all of them add up to the
process's wall time. A section may carry a ``batch`` (the number of samples of the model pass it times);
the profile scripts turn the batch-size histogram into FLOPs (``FlopCounterMode``) and GFLOP/s.

This module imports nothing of raysfl, so method logic (``raysfl/algorithms``) may use it without depending
on the engine.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

_NULL: AbstractContextManager[None] = nullcontext()


class Profiler:
    """Accumulates count, inclusive and exclusive wall time per section name, and model-pass batch sizes.

    Args:
        lane: the name of the process this profiler runs in ("process", "driver", "server", "pool0", ...).
    """

    def __init__(self, lane: str) -> None:
        self.lane = lane
        self.t0 = time.perf_counter()
        self.t0_epoch_s = time.time()  # to match other clocks (Ray's task timeline) to this profile
        self.stats: dict[str, list[float]] = {}  # name -> [calls, inclusive s, exclusive s]
        self.batches: dict[str, dict[int, int]] = {}  # name -> {batch size: calls}
        self._stack: list[list[float]] = []  # open sections: [start, time spent in child sections]
        self.outer_s = 0.0  # wall time inside outermost sections
        self.lanes: list[dict[str, Any]] = []  # reports of other processes (Ray actors), added by the driver

    @contextmanager
    def section(self, name: str, batch: int | None = None) -> Iterator[None]:
        """Time the enclosed block as ``name`` (and count one model pass of ``batch`` samples)."""
        frame = [time.perf_counter(), 0.0]
        self._stack.append(frame)
        try:
            yield
        finally:
            inclusive = time.perf_counter() - frame[0]
            self._stack.pop()
            if self._stack:
                self._stack[-1][1] += inclusive
            else:
                self.outer_s += inclusive
            row = self.stats.setdefault(name, [0, 0.0, 0.0])
            row[0] += 1
            row[1] += inclusive
            row[2] += inclusive - frame[1]
            if batch is not None:
                hist = self.batches.setdefault(name, {})
                hist[int(batch)] = hist.get(int(batch), 0) + 1

    def report(self) -> dict[str, Any]:
        """Plain data: lane, wall seconds since the profiler started, sections and batch histograms.

        ``lanes`` holds the reports gathered from other processes (Ray actors), if any.
        """
        return {
            "lane": self.lane,
            "wall_s": time.perf_counter() - self.t0,
            "t0_epoch_s": self.t0_epoch_s,
            "outer_s": self.outer_s,
            "sections": {
                name: {"calls": int(c), "inclusive_s": inc, "exclusive_s": exc}
                for name, (c, inc, exc) in self.stats.items()
            },
            "batches": {name: dict(h) for name, h in self.batches.items()},
            "lanes": list(self.lanes),
        }


ACTIVE: Profiler | None = None


def section(name: str, batch: int | None = None) -> AbstractContextManager[None]:
    """A timed section when this process profiles; otherwise a shared no-op context."""
    prof = ACTIVE
    if prof is None:
        return _NULL
    return prof.section(name, batch)


def enable(lane: str) -> Profiler:
    """Start profiling this process under ``lane`` (replacing any profiler already active)."""
    global ACTIVE
    ACTIVE = Profiler(lane)
    return ACTIVE


def disable() -> Profiler | None:
    """Stop profiling; returns the profiler that was active (``None`` if none was)."""
    global ACTIVE
    prof, ACTIVE = ACTIVE, None
    return prof


def enabled() -> bool:
    """Whether this process profiles."""
    return ACTIVE is not None


__all__ = ["ACTIVE", "Profiler", "disable", "enable", "enabled", "section"]
