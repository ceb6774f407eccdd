"""The columns of ``events.parquet`` and the rows a policy may log into them.

No pyarrow here: method code and the actors import this module. The engine's columns
(:data:`ENGINE_COLUMNS`) come first, then those a method declares in ``AlgorithmSpec.event_columns``. A
``Log`` row may leave any column out (a null there); a column that is in neither, or a value of another
type, is refused by the coordinator when the row is logged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from raysfl.config import short_repr

ENGINE_COLUMNS: dict[str, str] = {
    "t": "float64",
    "kind": "string",
    "client": "int64",
    "e": "int64",
    "version": "int64",
    "staleness": "int64",
    "bytes_up": "int64",
    "bytes_down": "int64",
    "queue_s": "float64",
    "server_update": "int64",
    "share_fast": "float64",
    "share_slow": "float64",
    "bytes_labels": "int64",
    "discarded": "int64",
}

# the Python values a column of each type takes; a bool is only a bool (in a number column it would be
# written as 1 or 1.0 and read back as a count)
_VALUES: dict[str, tuple[type, ...]] = {
    "int64": (int, np.integer),
    "float64": (float, int, np.floating, np.integer),
    "string": (str,),
    "bool": (bool, np.bool_),
}
COLUMN_TYPES = tuple(_VALUES)


def event_column_problems(columns: Mapping[str, str]) -> list[str]:
    """What is wrong with a method's own columns (name → one of :data:`COLUMN_TYPES`)."""
    problems = []
    for name, kind in columns.items():
        if not (isinstance(name, str) and name.isidentifier()):
            problems.append(f"column {name!r} is not a name (letters, digits, _)")
        elif name in ENGINE_COLUMNS:
            problems.append(f"column {name!r} is one of the engine's ({', '.join(ENGINE_COLUMNS)})")
        if kind not in _VALUES:
            allowed = ", ".join(map(repr, COLUMN_TYPES))
            problems.append(f"column {name!r} has type {kind!r}; it is one of {allowed}")
    return problems


def event_columns(own: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every column of a run's ``events.parquet``: the engine's, then the method's ``own``."""
    return {**ENGINE_COLUMNS, **(own or {})}


def row_problems(row: Mapping[str, Any], columns: Mapping[str, str]) -> list[str]:
    """Why ``row`` cannot be logged under ``columns`` (:func:`event_columns`); None is a null anywhere."""
    problems = []
    for name, value in row.items():
        if value is None:
            continue
        kind = columns.get(name)
        if kind is None:
            problems.append(f"column {name!r} is not one of events.parquet's")
            continue
        is_bool = isinstance(value, (bool, np.bool_))
        if is_bool != (kind == "bool") or not isinstance(value, _VALUES[kind]):
            got = f"{type(value).__name__} {short_repr(value, 40)}"
            problems.append(f"column {name!r} holds {kind}, not {got}")
    return problems
