"""Parquet logs of a run: ``events.parquet`` (one row per event), ``metrics.parquet`` (one per evaluation).

events.parquet columns (null where an event has no such quantity):
    t (float64, emulated s), kind (str: start | act | model | ...), client (int64), e (int64, local
    iteration), version (int64, global model version at the event), staleness (int64, versions between
    the client's model and the current one), bytes_up, bytes_down (int64), queue_s (float64, wait for
    the server), server_update (int64, 1 when this arrival triggered a server update), share_fast,
    share_slow (float64, share of the flushed activation buffer from the fastest / slowest quarter of
    devices), bytes_labels (int64, the part of bytes_up that is labels; CSE-FSL and its baselines),
    discarded (int64, 1 when an arriving update was dropped as too stale; FedSA, FedASMU's τ rule);
    then the columns a method declares in ``AlgorithmSpec.event_columns`` (:func:`event_schema`).

metrics.parquet columns: iteration, t (emulated s), wall_s, accuracy, loss, train_loss (a split method's
    mean server loss since the last evaluation, null when no server step ran), bytes_up, bytes_down, events,
    plus any other numeric metric the method's ``evaluate`` returns.

Rows are written in chunks as the run goes, so a crashed or interrupted run keeps what it logged.
With checkpoints, each checkpoint seals the event rows so far into ``checkpoints/events-<iteration>.parquet``
and the log continues in a fresh ``events.parquet``; closing the log joins the segments into
``events.parquet`` again (the segments stay, a later resume needs them). A resumed run starts from the
segments its checkpoint lists, so rows logged after that checkpoint by the crashed attempt are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from raysfl.metrics.columns import event_columns
from raysfl.run_files import error_line
from raysfl.safe_write import replace_file, unlinked

_ARROW_TYPES = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string(), "bool": pa.bool_()}


def event_schema(own: Mapping[str, str] | None = None) -> pa.Schema:
    """The schema of ``events.parquet``: the engine's columns, then a method's ``own`` (name → type name)."""
    return pa.schema([(name, _ARROW_TYPES[kind]) for name, kind in event_columns(own).items()])


EVENT_SCHEMA = event_schema()


class EventLog:
    """Appends event rows to ``events.parquet`` every ``chunk`` rows (:func:`event_schema`)."""

    def __init__(self, path: Path, chunk: int = 4096, schema: pa.Schema = EVENT_SCHEMA) -> None:
        self.path = path
        self.chunk = chunk
        self.schema = schema
        self._rows: list[Mapping[str, Any]] = []
        self.segments: list[Path] = []
        self._writer = pq.ParquetWriter(str(unlinked(path)), schema)

    def on_event(self, row: Mapping[str, Any]) -> None:
        """Buffer one row; write a chunk when full."""
        self._rows.append(row)
        if len(self._rows) >= self.chunk:
            self._flush()

    def on_eval(self, row: dict[str, Any]) -> None:
        """Evaluations go to :class:`MetricsLog`; flush here so the event log keeps pace with them."""
        self._flush()

    def _flush(self) -> None:
        if not self._rows:
            return
        cols = {name: [r.get(name) for r in self._rows] for name in self.schema.names}
        self._writer.write_table(pa.table(cols, schema=self.schema))
        self._rows = []

    def checkpoint(self, ck_dir: Path, tag: str) -> list[str]:
        """Seal the rows so far as a segment in ``ck_dir``; returns all segments (relative to the run)."""
        self._flush()
        self._writer.close()
        segment = ck_dir / f"events-{tag}.parquet"
        self.path.replace(segment)
        self.segments.append(segment)
        self._writer = pq.ParquetWriter(str(unlinked(self.path)), self.schema)
        return [str(p.relative_to(self.path.parent)) for p in self.segments]

    def resume(self, segments: list[str] | None, evals: list[dict[str, Any]]) -> None:
        """Continue after a checkpoint's segments (``evals``: unused, part of the sink interface).

        Raises:
            CheckpointError: a segment is missing, damaged or has other columns: the resumed run could not
                join its event log at the end, so it is refused before it trains.
        """
        from raysfl.engine.checkpoint import CheckpointError

        listed = [self.path.parent / s for s in segments or []]
        checkpoints = (self.path.parent / "checkpoints").resolve()
        for segment in listed:
            if not segment.resolve().is_relative_to(checkpoints):
                raise CheckpointError(  # a received run's checkpoint must not pull other files into its log
                    f"the checkpoint lists the event log segment {segment}, outside the run's checkpoints/ "
                    "folder; the checkpoint is damaged or not raysfl's"
                )
            try:
                schema = pq.read_schema(str(segment))
            except (OSError, ValueError, pa.ArrowException) as err:
                raise CheckpointError(
                    f"the event log segment {segment} that the checkpoint continues is missing or damaged "
                    f"({error_line(err)}); restore it, or start the run over with --overwrite"
                ) from None
            if schema.names != self.schema.names:
                raise CheckpointError(
                    f"the event log segment {segment} has the columns {schema.names}, the resumed run "
                    f"{self.schema.names} (has the method's AlgorithmSpec.event_columns changed?)"
                )
        self.segments = listed  # joined at close(): only once each is known to be readable

    def close(self) -> None:
        """Write what is left, close the file, and join the checkpoint segments in front of it."""
        self._flush()
        self._writer.close()
        if not self.segments:
            return
        parts = [*self.segments, self.path]

        def join(joined: Path) -> None:
            with pq.ParquetWriter(str(joined), self.schema) as out:
                for part in parts:
                    out.write_table(pq.read_table(str(part), schema=self.schema))

        replace_file(self.path, join)


class MetricsLog:
    """Rewrites ``metrics.parquet`` after every evaluation (a few hundred rows at most)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []

    def on_event(self, row: Mapping[str, Any]) -> None:
        """Not used."""

    def on_eval(self, row: dict[str, Any]) -> None:
        """Append a row and rewrite the file; a value None is a null (a metric with no value this time)."""
        kept = (int, float, str, bool, type(None))
        self.rows.append({k: v for k, v in row.items() if isinstance(v, kept)})
        table = pa.Table.from_pylist(self.rows)
        replace_file(self.path, lambda tmp: pq.write_table(table, str(tmp)))

    def resume(self, state: Any, evals: list[dict[str, Any]]) -> None:
        """Start again from a checkpoint's evaluations (rows logged after it are dropped)."""
        self.rows = []
        for row in evals:
            self.on_eval(row)

    def close(self) -> None:
        """Nothing buffered."""
