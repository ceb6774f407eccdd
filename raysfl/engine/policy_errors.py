"""Errors of a policy's own making, in its terms: a method written outside raysfl meets them first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from raysfl.algorithms.actions import CLIENT, SERVER, Call, Report

REPORT_KEYS = ("iteration", "t")  # what every sink reads from a report's info
ENGINE_REPORT_KEYS = ("bytes_up", "bytes_down", "events", "wall_s")  # what the engine adds to a report's row


class MethodError(RuntimeError):
    """A method's logic handed the engine something it cannot use; the message says what, in its terms.

    The CLI prints the message without a traceback, which would show only the engine's check.
    """


class PolicyError(MethodError):
    """The policy asked for something the engine cannot do (a slot nobody produced, an event in the past)."""


class EvaluateError(MethodError):
    """The server's ``evaluate`` returned no metrics row.

    No mapping, no accuracy or loss, a value that is not one number, string or bool, or a key the engine
    writes itself.
    """


def unfilled_slot(name: tuple[Any, ...], use: str = "read") -> PolicyError:
    """The error for a slot that a call or report reads but no earlier call produced (or one freed it)."""
    return PolicyError(
        f"the policy {use} slot {name!r}, which no earlier Call produced (out=Slot({name!r})), or which a "
        "call already freed (free=...) or the engine fetched"
    )


def call_problem(call: Call, num_clients: int | None) -> str | None:
    """What makes ``call`` impossible to dispatch: no such target, or a client call without its client."""
    if call.target not in (SERVER, CLIENT):
        return f"Call({call.target!r}, {call.method!r}): the target is SERVER or CLIENT"
    if call.target != CLIENT:
        return None
    client = call.client
    valid = isinstance(client, (int, np.integer)) and not isinstance(client, bool) and client >= 0
    if valid and (num_clients is None or client < num_clients):
        return None
    bound = "" if num_clients is None else f" below K = {num_clients}"
    return (
        f"Call(CLIENT, {call.method!r}) with client = {client!r}; a client call names the virtual client "
        f"it runs for: client = a whole number from 0{bound}"
    )


def report_problem(report: Report) -> str | None:
    """What the sinks would miss in ``report.info``: it is a dict with an ``iteration`` and a time ``t``."""
    info = report.info
    if not isinstance(info, Mapping):
        kind = type(info).__name__
        return f"Report({report.slot!r}) with info of type {kind}; info is a dict with 'iteration' and 't'"
    missing = [k for k in REPORT_KEYS if k not in info]
    if missing:
        return (
            f"Report({report.slot!r}) with no {' or '.join(map(repr, missing))} in its info "
            f"({sorted(map(str, info))}); every report says which global iteration ('iteration', a whole "
            "number) it evaluates and at which emulated time ('t', seconds)"
        )
    engine = [k for k in ENGINE_REPORT_KEYS if k in info]
    if engine:
        return (
            f"Report({report.slot!r}) with {', '.join(map(repr, engine))} in its info, which the engine "
            "writes in every metrics row (the run's traffic and event counters, the wall time); rename it"
        )
    if isinstance(info["iteration"], bool) or not isinstance(info["iteration"], (int, np.integer)):
        return f"Report({report.slot!r}) with iteration = {info['iteration']!r}; it is a whole number"
    if isinstance(info["t"], bool) or not isinstance(info["t"], (int, float, np.integer, np.floating)):
        return f"Report({report.slot!r}) with t = {info['t']!r}; it is the emulated time in seconds"
    return None
