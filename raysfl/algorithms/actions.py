"""Events and the actions a policy returns; plain data only (no tensors), so they pickle and checkpoint.

A policy sees an :class:`Event` and answers with actions:
    :class:`Call`      run ``method`` on the server or on a virtual client's pool; arguments may be
                       :class:`Slot` names whose values live in the dispatcher (Ray ``ObjectRef``s);
                       the result is stored under ``out``.
    :class:`Schedule`  push a future event at virtual time ``t``.
    :class:`Report`    deliver the value of a slot (e.g. an evaluation) to the metric sinks when ready.
    :class:`Log`       one row for the event log (bytes, staleness, ...).
    :class:`Stop`      end the run after this event.
An event may ask the coordinator to read a small slot value before the policy sees it (``data["fetch"]``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

SERVER = "server"
CLIENT = "client"


@dataclass(frozen=True)
class Slot:
    """A named value held by the dispatcher; names are tuples such as ``("acts", 7)``."""

    name: tuple[Any, ...]


class EventData(TypedDict, total=False):
    """The keys of ``Event.data`` the coordinator reads; a policy adds its own (plain data only).

    ``Event.data`` is typed ``Mapping[str, Any]``, so a policy reads its own keys without a type checker's
    complaint; ``EventData(awaits=...)`` builds the coordinator's keys with their types checked.

    ``awaits``: the slot name whose value is the arrival the event stands for (realtime mode waits for it).
    ``fetch``: the slot name of a small value the policy must read; the coordinator puts it in ``value``.
    """

    awaits: tuple[Any, ...]
    fetch: tuple[Any, ...]
    value: Any


@dataclass(frozen=True)
class Event:
    """Something that happens at virtual time ``t`` (seconds) to ``client`` (-1 = none).

    ``data["awaits"]`` may name the slot whose value is the arrival this event stands for (e.g.
    ``("acts", 7)``); in realtime mode the event is postponed until that value actually exists.

    ``data["fetch"]`` may name a slot holding a *small* value (a number, a short dict) that the policy must
    read to decide what happens next, e.g. the request slot a device chose from its own rewards. The
    coordinator waits for it, frees the slot and hands the event to the policy with ``data["value"]`` set.
    Every fetch is a synchronisation point with the worker that computes the value: use it sparingly.
    """

    t: float
    kind: str
    client: int = -1
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Call:
    """Run ``target.method(*args)`` on :data:`SERVER` or on the pool of ``client`` (:data:`CLIENT`).

    ``method`` names a method of the target's logic: preferably the function itself
    (``Call(SERVER, ServerLogic.evaluate)``, ``Call(CLIENT, MyClient.train, ...)``), which a reader and an
    editor can follow; it is stored as its name, a plain string, so a call pickles and checkpoints alike.
    """

    target: str
    method: str | Callable[..., Any]
    args: tuple[Any, ...] = ()
    client: int = -1
    out: Slot | None = None
    free: tuple[Slot, ...] = ()  # slots no longer needed once this call is dispatched
    pace_s: float = 0.0  # emulated duration of this operation; realtime mode makes it last that long

    def __post_init__(self) -> None:
        if not isinstance(self.method, str):
            object.__setattr__(self, "method", self.method.__name__)


@dataclass(frozen=True)
class Schedule:
    """Push ``Event(t, kind, client, data)``."""

    t: float
    kind: str
    client: int = -1
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Report:
    """Hand the value in ``slot`` (a dict of metrics) to the sinks, tagged with ``info``, once it is ready."""

    slot: Slot
    info: dict[str, Any]


class LogRow(TypedDict, total=False):
    """The columns of an event-log row the engine and the shared sinks know.

    ``bytes_up`` and ``bytes_down`` are summed into the run's traffic totals; the rest is written to
    ``events.parquet`` as given (a column a row leaves out, or sets to None, is empty there). The full list
    is :data:`raysfl.metrics.columns.ENGINE_COLUMNS`; a method declares columns of its own in
    ``AlgorithmSpec.event_columns``. The coordinator refuses a row with any other column or a value of
    another type (a tensor, a float in an integer column).
    """

    t: float  # virtual time of the event (s)
    kind: str  # what happened: "start", "model", "acts", ...
    client: int
    bytes_up: int  # client → server bytes this event stands for
    bytes_down: int  # server → client bytes
    staleness: int  # global versions between a job's start and its arrival
    version: int  # the global model version at the event


@dataclass(frozen=True)
class Log:
    """One event-log row (:class:`LogRow`, plus the columns the method declares in its spec)."""

    row: LogRow | dict[str, Any]


@dataclass(frozen=True)
class Stop:
    """End the run once this event's actions are dispatched."""

    reason: str


Action = Call | Schedule | Report | Log | Stop
