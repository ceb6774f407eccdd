"""The progress line: global iteration, emulated time, accuracy, events/s, ETA."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO


def format_duration(seconds: float) -> str:
    """``3725`` → ``'1h02m05s'``; ``65`` → ``'1m05s'``; ``5.2`` → ``'5s'``."""
    s = int(round(max(seconds, 0.0)))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h{m:02d}m{sec:02d}s"
    return f"{m}m{sec:02d}s" if m else f"{sec}s"


class ProgressLine:
    """Prints one line per evaluation (and at most every ``every_s`` wall seconds otherwise); resumable.

    The emulated time and the iteration shown are the latest reached so far, and the accuracy the latest
    evaluation's: an evaluation row carries its iteration and time, which can precede events already
    processed (on Ray an evaluation arrives late), and the line must not run backwards.
    """

    def __init__(self, total_iterations: int, every_s: float = 5.0, stream: TextIO | None = None) -> None:
        self.total = total_iterations
        self.every_s = every_s
        self.stream = stream or sys.stderr
        self.resume(None, [])

    def checkpoint(self, ck_dir: Path, tag: str) -> dict[str, Any]:
        """The line's part of a checkpoint: the iteration, emulated time, accuracy and wall time shown."""
        return {
            "iteration": self._iteration,
            "t": self._t,
            "accuracy": self._acc,
            "wall_s": self._wall_before + time.monotonic() - self._start,
        }

    def resume(self, state: Any, evals: list[dict[str, Any]]) -> None:
        """Go on from a checkpoint's ``state`` (:meth:`checkpoint`; none: start over).

        The line goes on with the run's iteration, emulated and wall time; events/s and the ETA count only
        this process's work, which is what the rest will take. A checkpoint from before the line kept a
        state gives its last evaluation's (``evals``).
        """
        last = state if isinstance(state, dict) else (evals[-1] if evals else {})
        self._start = time.monotonic()
        self._events = 0
        self._last_print = 0.0
        self._t = float(last.get("t", 0.0))
        self._acc = float(last["accuracy"]) if last.get("accuracy") is not None else None
        self._iteration = self._base_iteration = int(last.get("iteration", 0))
        self._wall_before = float(last.get("wall_s", 0.0))

    def on_event(self, row: Mapping[str, Any]) -> None:
        """Count events; print when the line is due."""
        self._events += 1
        self._t = max(self._t, float(row.get("t", self._t)))
        self._iteration = max(self._iteration, int(row.get("version", 0) or 0))
        now = time.monotonic()
        if now - self._last_print >= self.every_s:
            self._print(now)

    def on_eval(self, row: dict[str, Any]) -> None:
        """Record the accuracy and print."""
        self._acc = float(row["accuracy"]) if "accuracy" in row else self._acc
        self._iteration = max(self._iteration, int(row["iteration"]))
        self._t = max(self._t, float(row["t"]))
        self._print(time.monotonic())

    def _print(self, now: float) -> None:
        self._last_print = now
        wall = now - self._start
        rate = self._events / wall if wall > 0 else 0.0
        done = self._iteration - self._base_iteration
        left = max(self.total - self._iteration, 0)
        eta = format_duration(wall * left / done) if done > 0 else "?"
        acc = f"{self._acc:.4f}" if self._acc is not None else "-"
        print(
            f"iter {self._iteration}/{self.total} | emulated {format_duration(self._t)} | acc {acc} | "
            f"{rate:.0f} events/s | wall {format_duration(self._wall_before + wall)} | ETA {eta}",
            file=self.stream,
            flush=True,
        )

    def close(self) -> None:
        """Nothing to close."""
