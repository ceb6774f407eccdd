"""Reading a run directory's files for ``compare`` and ``report``, naming the file that is damaged.

A run directory (:mod:`raysfl.engine.runner`) holds ``summary.json``, ``config.toml`` and ``metrics.parquet``.
A file cut short, overwritten or written by something else is a :class:`RunDirError` that names it and
says what is wrong, never a decoder's traceback.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

METRIC_COLUMNS = ("iteration", "t")  # where and when each evaluation was; every metrics.parquet row has them


class RunDirError(RuntimeError):
    """A path that is not a finished run directory, or one of whose files is damaged."""


_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F] if chr(c) not in "\n\t"}
_CONTROL.update({c: f"\\x{c:02x}" for c in range(0x80, 0xA0)})


def printable(text: str) -> str:
    r"""``text`` with control characters other than newline and tab written as ``\xNN`` (four characters).

    What a run or sweep folder holds (a trial's recorded error, a scenario's name) may come from someone
    else; printed raw, an escape sequence in it would drive the terminal (retitle it, clear it).
    """
    return text.translate(_CONTROL)


def error_line(err: BaseException) -> str:
    """The first line of ``err``'s message (a decoder's may run on), or its type when it has none."""
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def _damaged(path: Path, err: Exception) -> RunDirError:
    return RunDirError(f"{path}: damaged or not raysfl's ({error_line(err)})")


def read_summary(run_dir: Path, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """``summary.json`` as a dict holding the ``required`` keys."""
    path = run_dir / "summary.json"
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise _damaged(path, err) from None
    if not isinstance(summary, dict):
        raise _damaged(path, ValueError("not a JSON object"))
    missing = [k for k in required if k not in summary]
    if missing:
        raise _damaged(path, ValueError(f"no {', '.join(missing)}"))
    return summary


def read_config(run_dir: Path) -> dict[str, Any]:
    """``config.toml`` as a dict."""
    path = run_dir / "config.toml"
    try:
        return tomllib.loads(path.read_text())
    except (OSError, ValueError) as err:  # tomllib.TOMLDecodeError and UnicodeDecodeError are ValueErrors
        raise _damaged(path, err) from None


def read_metrics(run_dir: Path, required: tuple[str, ...] = METRIC_COLUMNS) -> list[dict[str, Any]]:
    """``metrics.parquet``'s rows; the file must have the ``required`` columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = run_dir / "metrics.parquet"
    try:
        table = pq.read_table(path)
    except (OSError, ValueError, pa.ArrowException) as err:
        raise _damaged(path, err) from None
    missing = [c for c in required if c not in table.column_names]
    if missing:
        raise _damaged(path, ValueError(f"no column {', '.join(missing)}"))
    return table.to_pylist()
