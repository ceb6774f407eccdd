"""Errors of a policy's own making, in its terms: a method written outside raysfl meets them first."""

from __future__ import annotations

from typing import Any


class PolicyError(RuntimeError):
    """The policy asked for something the engine cannot do (a slot nobody produced, an event in the past)."""


def unfilled_slot(name: tuple[Any, ...], use: str = "read") -> PolicyError:
    """The error for a slot that a call or report reads but no earlier call produced (or one freed it)."""
    return PolicyError(
        f"the policy {use} slot {name!r}, which no earlier Call produced (out=Slot({name!r})), or which a "
        "call already freed (free=...) or the engine fetched"
    )
