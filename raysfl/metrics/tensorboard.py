"""TensorBoard sink: test metrics against global iteration and against emulated time.

The step is the global iteration. Every scalar is written with ``walltime = t_virtual`` (emulated seconds),
so TensorBoard's "Relative" axis shows emulated seconds since a series' first point: t = 0 for ``test/``,
``comm/``, ``time/`` and ``method/``, which start with the evaluation before training, and the first
evaluation after it for ``train/``, ``buffer/``, ``staleness``, ``speed/``; its "Wall" axis shows no clock.
The ``*_vs_emulated_ms`` tags use the emulated millisecond as step (TensorBoard steps are integers: whole
seconds gave evaluations less than a second apart one step), and ``test/accuracy_vs_bytes`` the bytes sent
so far (up + down). Metrics named ``bytes_up_*``, ``bytes_down_*`` and ``load_*`` (per-kind traffic) go
under ``comm/``, ``storage_*`` under ``storage/``, Lightweight FedSL's ``latency_*`` (per-round latency,
the paper's Fig. 4 quantity) and sparsity under ``fedsl/``, the engine's event count under ``time/events``,
and every other number a method's evaluation returns (GAS's ``generated``, FedAsync's ``mean_staleness``,
counters of updates and aggregations) under ``method/``, as in ``metrics.parquet``.
Between evaluations the sink accumulates staleness values and buffer composition, written as a
histogram, ``staleness/mean`` and ``staleness/max``, and buffer scalars at each evaluation: the rows logged
after the previous report and before this
evaluation's report (:meth:`TensorBoardSink.on_report`), whenever the evaluation's value arrives (on Ray,
later than the rows logged after it). ``speed/events_per_s`` is the coordinator's rate between two reports,
timed when each report was asked for: evaluations that arrive together would otherwise make spikes.

Given the run's configuration (``config.toml`` as data), the sink also writes it once, at step 0: as text
under ``config`` (the TOML, without the per-client device table and data sizes, which can hold 10,000 rows)
and as the run's hyperparameters for TensorBoard's HParams dashboard (:func:`hparams_of`), a session start
with no experiment summary, so that TensorBoard pointed at a sweep's folder takes the union of every
trial's hyperparameters (methods differ in their ``algorithm.params``) and offers every scalar as a metric.
Its start time is 0, the emulated clock's origin, as every other ``walltime`` here.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.hparams import metadata as hparams_metadata
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData, SessionStartInfo
from torch.utils.tensorboard import SummaryWriter

from raysfl.config import dumps_toml, toml_value

WRITTEN_ABOVE = frozenset(
    {"iteration", "t", "wall_s", "accuracy", "loss", "train_loss", "bytes_up", "bytes_down"}
)
"""Metrics row keys with tags of their own (or none: the wall time)."""

HPARAM_SECTIONS = ("data", "model", "system", "federation", "train", "algorithm")
"""The scenario tables that define the experiment; ``engine`` and ``metrics`` say how it runs, not what."""

EXACT_INT = 2**53
"""The largest integer a double holds exactly (HParams numbers are doubles)."""

PER_CLIENT = (("devices",), ("run", "client_sizes"))
"""Entries of ``config.toml`` with a row or a number per client, left out of the text."""


def hparams_of(config: Mapping[str, Any]) -> dict[str, bool | int | float | str]:
    """The run's hyperparameters: ``seed``, ``name`` and every leaf of :data:`HPARAM_SECTIONS`.

    Keys are dotted paths as in ``--set`` (``algorithm.params.q_s``). HParams holds booleans, strings and
    finite doubles: a list, an infinite number or an integer beyond 2**53 becomes its text, and an empty
    table, a missing value or any other type is left out.
    """
    out: dict[str, bool | int | float | str] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                walk(f"{prefix}.{key}", inner)
        elif isinstance(value, float) and not math.isfinite(value):
            out[prefix] = toml_value(value)  # "inf": the dashboard's JSON has no infinite numbers
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > EXACT_INT:
            # HParams numbers are doubles: a larger int would show rounded (or not convert at all)
            out[prefix] = (
                str(value) if value.bit_length() <= 10_000 else f"an int of {value.bit_length()} bits"
            )
        elif isinstance(value, (bool, int, float, str)):
            out[prefix] = value
        elif isinstance(value, (list, tuple)):
            out[prefix] = toml_value(value)

    for key in ("seed", "name"):
        if key in config:
            walk(key, config[key])
    for section in HPARAM_SECTIONS:
        walk(section, config.get(section, {}))
    return out


def session_start(hparams: Mapping[str, bool | int | float | str]) -> Summary:
    """An HParams session start holding ``hparams``, started at time 0.

    Built from the plugin's protos: TensorBoard's own writer of it imports TensorFlow.
    """
    info = SessionStartInfo(start_time_secs=0.0)
    for name, value in hparams.items():
        if isinstance(value, bool):
            info.hparams[name].bool_value = value
        elif isinstance(value, (int, float)):
            info.hparams[name].number_value = value
        else:
            info.hparams[name].string_value = value
    meta = hparams_metadata.create_summary_metadata(HParamsPluginData(session_start_info=info))
    value = Summary.Value(
        tag=hparams_metadata.SESSION_START_INFO_TAG, metadata=meta, tensor=hparams_metadata.NULL_TENSOR
    )
    return Summary(value=[value])


def config_text(config: Mapping[str, Any]) -> str:
    """The configuration as a TOML code block for TensorBoard's text dashboard (Markdown)."""
    shown: dict[str, Any] = {k: dict(v) if isinstance(v, Mapping) else v for k, v in config.items()}
    for path in PER_CLIENT:
        table = shown
        for key in path[:-1]:
            table = table.get(key, {})
        table.pop(path[-1], None)
    return "```toml\n" + dumps_toml(shown).strip() + "\n```"


def _tag(key: str) -> str:
    """The tag of an evaluation's other numbers: by prefix, else the method's own under ``method/``."""
    if key.startswith(("bytes_up_", "bytes_down_", "load_")):
        return f"comm/{key}"
    if key.startswith("storage_"):
        return f"storage/{key}"
    if key.startswith(("latency_", "sparsity_", "client_sparsity")):
        return f"fedsl/{key}"
    if key == "events":
        return "time/events"
    return f"method/{key}"


class TensorBoardSink:
    """Writes ``tb/`` under the run directory."""

    def __init__(self, logdir: Path, config: Mapping[str, Any] | None = None) -> None:
        self.logdir = logdir
        self.config = config
        self.writer = SummaryWriter(log_dir=str(logdir))
        self._write_config()
        self._staleness: list[int] = []
        self._share_fast: list[float] = []
        self._share_slow: list[float] = []
        self._last_wall: float | None = None
        self._last_events = 0
        self._closed: deque[dict[str, Any]] = deque()  # per report asked for, not yet evaluated
        self.history: list[dict[str, Any]] = []  # per evaluation: what was collected between evaluations

    def on_event(self, row: Mapping[str, Any]) -> None:
        """Collect staleness and buffer composition."""
        if row.get("staleness") is not None:
            self._staleness.append(int(row["staleness"]))
        if row.get("share_fast") is not None:
            self._share_fast.append(float(row["share_fast"]))
            self._share_slow.append(float(row["share_slow"]))

    def on_report(self, info: dict[str, Any]) -> None:
        """Close the rows collected since the previous report: they belong to this report's evaluation.

        The report's event count and wall time (when it was asked for) are kept with them for the speed.
        """
        collected = self._take()
        collected["asked_events"] = int(info.get("events", 0))
        collected["asked_wall_s"] = float(info.get("wall_s", 0.0))
        self._closed.append(collected)

    def on_eval(self, row: dict[str, Any]) -> None:
        """Write the evaluation and the quantities collected between its report and the previous one."""
        collected = self._closed.popleft() if self._closed else self._take()
        self.history.append(collected)
        self._write(row, collected)

    def _take(self) -> dict[str, Any]:
        """The values collected since the last take, as arrays; the collection starts again."""
        collected = {
            "staleness": np.asarray(self._staleness, dtype=np.int64),
            "share_fast": np.asarray(self._share_fast, dtype=np.float64),
            "share_slow": np.asarray(self._share_slow, dtype=np.float64),
        }
        self._staleness, self._share_fast, self._share_slow = [], [], []
        return collected

    def checkpoint(self, ck_dir: Path, tag: str) -> dict[str, Any]:
        """What a resumed run needs to rewrite the same event file: the per-evaluation history.

        A checkpoint follows a drain, so every report asked for has been evaluated (nothing is closed
        and waiting).
        """
        if self._closed:
            raise RuntimeError("invariant broken: a TensorBoard checkpoint with reports still unevaluated")
        pending = {
            "staleness": list(self._staleness),
            "fast": list(self._share_fast),
            "slow": list(self._share_slow),
        }
        return {"history": list(self.history), "pending": pending}

    def resume(self, state: dict[str, Any] | None, evals: list[dict[str, Any]]) -> None:
        """Rewrite ``tb/`` from the checkpoint's evaluations, so nothing logged after it survives."""
        self.writer.close()
        for old in self.logdir.glob("events.out.tfevents.*"):
            old.unlink()
        self.writer = SummaryWriter(log_dir=str(self.logdir))
        self._write_config()
        self._last_wall, self._last_events = None, 0
        self._closed.clear()
        history = (state or {}).get("history", [])
        empty = {"staleness": np.zeros(0, np.int64), "share_fast": np.zeros(0), "share_slow": np.zeros(0)}
        for i, row in enumerate(evals):
            self._write(row, history[i] if i < len(history) else empty)
        self.history = list(history)
        pending = (state or {}).get("pending", {})
        self._staleness = list(pending.get("staleness", []))
        self._share_fast, self._share_slow = list(pending.get("fast", [])), list(pending.get("slow", []))

    def _write_config(self) -> None:
        """The configuration as text and hyperparameters, at step 0 and emulated time 0."""
        if self.config is None:
            return
        self.writer.add_text("config", config_text(self.config), 0, walltime=0.0)
        start = session_start(hparams_of(self.config))
        self.writer._get_file_writer().add_summary(start, 0, walltime=0.0)  # as torch's add_hparams does
        self.writer.flush()

    def _write(self, row: dict[str, Any], collected: dict[str, Any]) -> None:
        it, t = int(row["iteration"]), float(row["t"])
        w = self.writer
        for key in ("accuracy", "loss"):
            if key in row:
                w.add_scalar(f"test/{key}", row[key], it, walltime=t)
                w.add_scalar(f"test/{key}_vs_emulated_ms", row[key], round(1000 * t), walltime=t)
        if row.get("train_loss") is not None:  # None: no server step since the last evaluation
            w.add_scalar("train/server_loss", row["train_loss"], it, walltime=t)
        w.add_scalar("comm/bytes_up", row["bytes_up"], it, walltime=t)
        w.add_scalar("comm/bytes_down", row["bytes_down"], it, walltime=t)
        if "accuracy" in row:
            sent = int(row["bytes_up"]) + int(row["bytes_down"])
            w.add_scalar("test/accuracy_vs_bytes", row["accuracy"], sent, walltime=t)
        for key, value in row.items():  # per-kind counters, storage, and the method's own numbers
            if key in WRITTEN_ABOVE or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            w.add_scalar(_tag(key), value, it, walltime=t)
        w.add_scalar("time/emulated_s", t, it, walltime=t)
        if len(collected["staleness"]):
            w.add_histogram("staleness", collected["staleness"], it, walltime=t)
            w.add_scalar("staleness/mean", float(np.mean(collected["staleness"])), it, walltime=t)
            w.add_scalar("staleness/max", int(np.max(collected["staleness"])), it, walltime=t)
        if len(collected["share_fast"]):
            w.add_scalar(
                "buffer/share_fastest_quarter", float(np.mean(collected["share_fast"])), it, walltime=t
            )
            w.add_scalar(
                "buffer/share_slowest_quarter", float(np.mean(collected["share_slow"])), it, walltime=t
            )
        # when the report was asked for; a sink that was not told (an older checkpoint's history) has the
        # row's own values, timed when the evaluation arrived
        wall = float(collected.get("asked_wall_s", row.get("wall_s", 0.0)))
        events = int(collected.get("asked_events", row.get("events", 0)))
        if self._last_wall is not None and wall > self._last_wall:
            w.add_scalar(
                "speed/events_per_s", (events - self._last_events) / (wall - self._last_wall), it, walltime=t
            )
        self._last_wall, self._last_events = wall, events
        w.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.close()
