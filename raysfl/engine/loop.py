"""The coordinator: pop the earliest event, advance the clock, ask the policy, dispatch (STYLE §1.1)."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from raysfl import profiling
from raysfl.algorithms.actions import Action, Call, Event, Log, Report, Schedule, Slot, Stop
from raysfl.api import Policy
from raysfl.engine.clock import RealtimeClock, VirtualClock
from raysfl.engine.dispatch import Dispatcher
from raysfl.engine.policy_errors import EvaluateError, PolicyError, call_problem, report_problem
from raysfl.engine.queue import EventQueue
from raysfl.metrics.columns import COLUMN_TYPES, event_columns, row_problems

REQUIRED_METRICS = ("accuracy", "loss")


def plain_scalar(value: Any) -> Any:
    """A 0-d tensor or array, or a NumPy scalar, as the Python number it holds; anything else as it is."""
    return value.item() if getattr(value, "ndim", None) == 0 and hasattr(value, "item") else value


def metric_values(metrics: Any, taken: Collection[str] = ()) -> dict[str, Any]:
    """A report's value (what the server's ``evaluate`` returned) as the metric columns of its row.

    ``evaluate`` returns a mapping with at least ``accuracy`` and ``loss``; every value is a number, a
    string, a bool or ``None``. A 0-d tensor or a NumPy scalar (``torch.tensor(0.5)``, ``np.float32(0.5)``)
    is read as the Python number it holds, so the row writes to ``metrics.parquet`` and ``summary.json``
    as the same value would have. ``taken`` names the row's columns the engine writes (``iteration``, ``t``,
    the byte and event counters, ``wall_s``): a metric of one of those names would overwrite them.

    Example:
        >>> import numpy as np
        >>> metric_values({"accuracy": np.float32(0.5), "loss": 2, "note": "warm-up"})
        {'accuracy': 0.5, 'loss': 2, 'note': 'warm-up'}

    Raises:
        TypeError: ``metrics`` is not a mapping, or a value is of another type (the message names the key).
        ValueError: ``accuracy`` or ``loss`` is missing (the message lists the keys there are), or a key is
            in ``taken`` (the message names it and the engine's columns).
    """
    if not isinstance(metrics, Mapping):
        raise TypeError(
            f"evaluate returned a {type(metrics).__name__}; it must return a mapping of metric names to "
            "numbers, with at least 'accuracy' and 'loss'"
        )
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        value = plain_scalar(value)
        if value is not None and not isinstance(value, (int, float, str, bool)):
            shape = f" of shape {tuple(value.shape)}" if hasattr(value, "shape") else ""
            raise TypeError(
                f"evaluate returned {key!r} = a {type(value).__name__}{shape}; a metric is one number "
                "(int or float), a string or a bool"
            )
        out[str(key)] = value
    missing = [k for k in REQUIRED_METRICS if k not in out]
    if missing:
        raise ValueError(
            f"evaluate returned no {' and no '.join(map(repr, missing))} (its keys: "
            f"{', '.join(map(repr, out)) or 'none'}); it returns at least 'accuracy' and 'loss'"
        )
    clash = [k for k in out if k in taken]
    if clash:
        raise ValueError(
            f"evaluate returned {', '.join(map(repr, clash))}, a column its metrics row already has from the "
            f"engine or the policy's Report ({', '.join(map(repr, taken))}); name the metric otherwise"
        )
    return out


def _source(ev: Event | None) -> str:
    """The policy method that returned the actions for ``ev``, as an error message names it."""
    return "start()" if ev is None else f"on_event({ev.kind!r} at t = {ev.t:g})"


class Sink(Protocol):
    """Receives the event log and the evaluation results."""

    def on_event(self, row: Mapping[str, Any]) -> None:
        """One event-log row."""

    def on_eval(self, row: dict[str, Any]) -> None:
        """One evaluation (metrics plus iteration, emulated and wall time, bytes so far)."""

    def close(self) -> None:
        """Flush and close."""


@runtime_checkable
class CheckpointingSink(Protocol):
    """A sink with its own part of a checkpoint (sealed log segments, a history to rewrite)."""

    def checkpoint(self, ck_dir: Path, tag: str) -> Any:
        """Seal what is written so far for the checkpoint ``tag`` in ``ck_dir``; returns the sink's state."""


@runtime_checkable
class ReportingSink(Protocol):
    """A sink that wants to know when the policy asks for a report, in order with the event rows.

    Evaluations reach :meth:`Sink.on_eval` when their value is ready, which on Ray is later than the rows
    logged after them; a sink that sums rows per evaluation closes its sum here instead.
    """

    def on_report(self, info: dict[str, Any]) -> None:
        """A report was asked for; its evaluation comes to ``on_eval`` later, reports in this order.

        ``info`` is the report's row so far (iteration, t, bytes, events) plus ``wall_s``, the run's wall
        time when the report was asked for (the row's own ``wall_s`` is when its evaluation arrived).
        """


@runtime_checkable
class ResumableSink(Protocol):
    """A sink that can continue a resumed run (or, with ``state = None``, forget a failed attempt)."""

    def resume(self, state: Any, evals: list[dict[str, Any]]) -> None:
        """Continue from the state its :meth:`CheckpointingSink.checkpoint` returned, and the evaluations."""


@dataclass
class Totals:
    """Running totals the coordinator keeps for reports."""

    events: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    evals: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str = ""
    postponed: int = 0  # realtime mode: arrivals taken after they were due (each counted once)
    late_max_s: float = 0.0  # realtime mode: the most emulated seconds an arrival came after it was due
    lag_max_s: float = 0.0  # realtime mode: the most wall seconds an event was released after its moment


class Coordinator:
    """Runs a policy over a dispatcher in virtual time; writes to sinks."""

    def __init__(
        self,
        policy: Policy,
        dispatcher: Dispatcher,
        sinks: list[Sink],
        clock: VirtualClock | None = None,
        *,
        log_columns: Mapping[str, str] | None = None,
        num_clients: int | None = None,
    ) -> None:
        """Run ``policy`` over ``dispatcher`` into ``sinks``.

        ``log_columns``: the method's own event-log columns (``AlgorithmSpec.event_columns``), which a
        ``Log`` row may hold beside the engine's; ``num_clients``: K, the bound of a client call's id.
        """
        self.policy = policy
        self.dispatcher = dispatcher
        self.sinks = sinks
        self.clock = clock or VirtualClock()
        self.log_columns = event_columns(log_columns)
        self.num_clients = num_clients
        self.queue = EventQueue()
        self.totals = Totals()
        self.stopped = False
        self._wall0 = time.monotonic()
        # realtime mode: each postponed arrival's first due time, by slot name (checkpoints keep it)
        self.due: dict[tuple[Any, ...], float] = {}

    def run(self, resumed: bool = False, after_event: Callable[[Coordinator], None] | None = None) -> Totals:
        """Run until the policy stops or no event is left; then deliver every outstanding report.

        ``resumed``: the state was restored from a checkpoint, so the policy is not started again.
        ``after_event`` is called after each event (checkpoints, fault injection).
        """
        if isinstance(self.clock, RealtimeClock):  # paced from here, not from the set-up before
            self.clock.anchor()
        with profiling.section("coordinator"):
            if not resumed:
                self._apply(self.policy.start(), None)
            while self.queue and not self.stopped:
                self.step()
                if after_event is not None:
                    after_event(self)
            if not self.stopped:
                self.totals.stop_reason = "no more events"
            self.drain()
        return self.totals

    def elapsed_wall(self) -> float:
        """Wall seconds of the run so far: since the coordinator started, plus what a resumed run had."""
        return time.monotonic() - self._wall0

    def continue_wall(self, elapsed: float) -> None:
        """Resume: go on counting wall time from ``elapsed`` (a checkpoint's :meth:`elapsed_wall`)."""
        self._wall0 = time.monotonic() - elapsed

    def drain(self) -> None:
        """Wait for every outstanding call and deliver every outstanding report to the sinks."""
        self._deliver(self.dispatcher.drain())

    def step(self) -> None:
        """Process the earliest event.

        With a realtime clock an event that stands for an arrival (``data["awaits"]``) or reads a value
        (``data["fetch"]``) that does not exist yet is postponed by ``retry_s`` emulated seconds: arrivals
        are taken as they come, so the order depends on the host, and such runs are not deterministic.
        An event with ``data["fetch"]`` reaches the policy with that slot's value in ``data["value"]``.
        """
        ev = self.queue.pop()
        self.clock.advance(ev.t)
        awaits = ev.data.get("awaits") or ev.data.get("fetch")
        if isinstance(self.clock, RealtimeClock):
            self.totals.lag_max_s = max(self.totals.lag_max_s, self.clock.max_lag_s)  # checkpoints carry it
            name = tuple(awaits) if awaits else None
            if name is not None and not self.dispatcher.ready(Slot(name)):
                self.due.setdefault(name, ev.t)
                self.queue.push(Event(ev.t + self.clock.retry_s, ev.kind, ev.client, ev.data))
                return
            if name in self.due:  # a late arrival, taken now: counted once, however often it was retried
                self.totals.postponed += 1
                self.totals.late_max_s = max(self.totals.late_max_s, ev.t - self.due.pop(name))
        self.totals.events += 1
        fetch = ev.data.get("fetch")
        if fetch is not None:
            value = self.dispatcher.fetch(Slot(tuple(fetch)))
            ev = Event(ev.t, ev.kind, ev.client, {**ev.data, "value": value})
        with profiling.section("coordinator.policy"):
            actions = self.policy.on_event(ev)
        self._apply(actions, ev)
        self._deliver(self.dispatcher.poll())

    def _apply(self, actions: list[Action], ev: Event | None) -> None:
        """Carry out, in order, what the policy returned for ``ev`` (``None``: what ``start()`` returned).

        Raises:
            PolicyError: naming the policy method, when it returned no list of actions, an event in the
                past, a client call without its client, a report without its iteration and time, or a
                log row with a column the event log lacks or a value of another type.
        """
        if not isinstance(actions, (list, tuple)):
            raise PolicyError(
                f"the policy's {_source(ev)} returned a {type(actions).__name__}; it returns a list of "
                "actions (Call, Schedule, Log, Report, Stop), [] for none"
            )
        for a in actions:
            if isinstance(a, Call):
                problem = call_problem(a, self.num_clients)
                if problem:
                    raise PolicyError(f"the policy's {_source(ev)} returned {problem}")
                self.dispatcher.call(a)
            elif isinstance(a, Schedule):
                if a.t < self.clock.now:
                    raise PolicyError(
                        f"the policy's {_source(ev)} scheduled event {a.kind!r} at t = {a.t:g}, before the "
                        f"current time {self.clock.now:g}"
                    )
                self.queue.push(Event(a.t, a.kind, a.client, a.data))
            elif isinstance(a, Log):
                self._check_row(a, ev)
                self.totals.bytes_up += int(a.row.get("bytes_up", 0) or 0)
                self.totals.bytes_down += int(a.row.get("bytes_down", 0) or 0)
                with profiling.section("coordinator.sinks"):
                    for s in self.sinks:
                        s.on_event(a.row)
            elif isinstance(a, Report):
                problem = report_problem(a)
                if problem:
                    raise PolicyError(f"the policy's {_source(ev)} returned {problem}")
                info = {
                    **a.info,
                    "bytes_up": self.totals.bytes_up,
                    "bytes_down": self.totals.bytes_down,
                    "events": self.totals.events,
                }
                self.dispatcher.report(Report(a.slot, info))
                asked = {**info, "wall_s": self.elapsed_wall()}
                for s in self.sinks:
                    if isinstance(s, ReportingSink):
                        s.on_report(asked)
            elif isinstance(a, Stop):
                self.stopped = True
                self.totals.stop_reason = a.reason
            else:
                raise PolicyError(
                    f"the policy's {_source(ev)} returned {a!r}, which is not an action (Call, Schedule, "
                    "Log, Report, Stop)"
                )

    def _check_row(self, log: Log, ev: Event | None) -> None:
        """A row events.parquet can hold: a dict of the engine's and the method's columns, typed."""
        if not isinstance(log.row, Mapping):
            kind = type(log.row).__name__
            raise PolicyError(f"the policy's {_source(ev)} logged a {kind}; a Log row is a dict")
        problems = row_problems(log.row, self.log_columns)
        if problems:
            raise PolicyError(
                f"the policy's {_source(ev)} logged a row events.parquet cannot hold: {'; '.join(problems)}. "
                "A method adds columns of its own in AlgorithmSpec.event_columns (name → "
                f"{' | '.join(COLUMN_TYPES)}); a value None leaves a column empty"
            )

    def _deliver(self, ready: list[tuple[dict[str, Any], Any]]) -> None:
        for info, metrics in ready:
            try:
                values = metric_values(metrics, taken=[*info, "wall_s"])
            except (TypeError, ValueError) as err:
                where = f"the evaluation reported as iteration {info['iteration']}"
                raise EvaluateError(f"{err} ({where})") from None
            row = {**info, **values, "wall_s": self.elapsed_wall()}
            self.totals.evals.append(row)
            with profiling.section("coordinator.sinks"):
                for s in self.sinks:
                    s.on_eval(row)
