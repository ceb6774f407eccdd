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


DEVICE_TABLE = "\n[[devices]]\n"
"""Where ``config.toml``'s device table starts: a row per client, the file's last table (raysfl's TOML writer
puts arrays of tables last, and ``devices`` is the last of them)."""


def read_summary(run_dir: Path, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """``summary.json`` as a dict holding the ``required`` keys."""
    path = run_dir / "summary.json"
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as err:  # RecursionError: nesting thousands deep
        raise _damaged(path, err) from None
    if not isinstance(summary, dict):
        raise _damaged(path, ValueError("not a JSON object"))
    missing = [k for k in required if k not in summary]
    if missing:
        raise _damaged(path, ValueError(f"no {', '.join(missing)}"))
    return summary


def read_config(run_dir: Path) -> dict[str, Any]:
    """``config.toml`` as a dict, without its device table (:data:`DEVICE_TABLE`: cut before parsing).

    A run of 10,000 clients stores 1.5 MB of device rows, which no reader here uses: parsing them took
    longer than the rest of the file.
    """
    path = run_dir / "config.toml"
    try:
        text = path.read_text()
        return tomllib.loads(text.split(DEVICE_TABLE, 1)[0] + "\n")
    except (OSError, ValueError, RecursionError) as err:  # TOMLDecodeError, UnicodeDecodeError: ValueErrors
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
