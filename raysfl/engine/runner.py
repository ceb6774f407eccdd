"""The composition root: build data, model, devices, method and backend from a scenario; run; write outputs.

Outputs under the run directory (default ``runs/<scenario>-<timestamp>/``):
    config.toml       the resolved scenario, the drawn device table and what the data was
    metrics.parquet   one row per evaluation          (:mod:`raysfl.metrics.parquet`)
    events.parquet    one row per engine event        (:mod:`raysfl.metrics.parquet`)
    tb/               TensorBoard event files         (:mod:`raysfl.metrics.tensorboard`)
    summary.json      final/best accuracy, emulated and wall time, events/s, bytes
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import torch

from raysfl import __version__, profiling
from raysfl.algorithms.base import RunSetup
from raysfl.api import Policy, check_logic
from raysfl.config import ConfigError, dumps_toml
from raysfl.data import load_dataset, partition_dataset
from raysfl.data.transforms import make_transform
from raysfl.engine import float_mode
from raysfl.engine.checkpoint import (
    Checkpointer,
    CheckpointError,
    check_same_scenario,
    checkpoint_files,
    checkpoint_wall_s,
    finished_summary,
    load_latest,
    require_checkpoint,
    run_summary,
)
from raysfl.engine.clock import RealtimeClock, VirtualClock
from raysfl.engine.dispatch import Dispatcher, LocalDispatcher, WorkerLostError
from raysfl.engine.hosts import ClientHost, ServerDeviceError, ServerHost, build_model, pick_device
from raysfl.engine.interrupts import remembered_interrupts
from raysfl.engine.loop import Coordinator, ResumableSink, Sink, Totals, plain_scalar
from raysfl.engine.policy_errors import ENGINE_REPORT_KEYS, REPORT_KEYS
from raysfl.engine.provenance import mixed_processors_note, processor_name, source_commit
from raysfl.engine.rng import stream
from raysfl.metrics.divergence import DivergenceNotice
from raysfl.metrics.parquet import EventLog, MetricsLog, event_schema
from raysfl.metrics.progress import ProgressLine
from raysfl.metrics.tensorboard import TensorBoardSink
from raysfl.models.flops import profile_split_model
from raysfl.models.precision import EMULATED_BFLOAT16, native_bfloat16
from raysfl.safe_write import refuse_link, replace_text
from raysfl.scenario import Scenario, scenario_to_dict
from raysfl.system.durations import TimeModel
from raysfl.system.profiles import draw_devices


@dataclass
class Prepared:
    """Everything the driver computes before any actor starts."""

    scenario: Scenario
    setup: RunSetup
    dataset: Any
    transform: Any
    devices: Any
    time_model: TimeModel
    profile: Any


def load_partitioned(sc: Scenario, data_dir: str | None = None) -> tuple[Any, Any, Any]:
    """The scenario's dataset, its transform and its partition over the K clients (``("partition",)`` stream).

    What every run starts from; the peer benchmarks (benchmarks/peers/) build their identical work from it.
    """
    dataset = load_dataset(sc.data, data_dir)
    transform = make_transform(dataset, sc.data)
    part = partition_dataset(
        dataset.train_y,
        sc.data,
        sc.federation.num_clients,
        stream(sc.seed, "partition"),
        writers=dataset.train_writers,
        num_classes=dataset.num_classes,
    )
    return dataset, transform, part


def prepare(sc: Scenario, data_dir: str | None = None) -> Prepared:
    """Load and partition the data, draw the devices and measure the model, all from the scenario seed."""
    float_mode.check_supported(sc.engine.flush_denormal)
    dataset, transform, part = load_partitioned(sc, data_dir)
    shape = (int(dataset.train_x.shape[1]), transform.crop_size, transform.crop_size)
    setup = RunSetup(sc, sc.params, shape, dataset.num_classes, tuple(part.indices), part.histograms)
    devices = draw_devices(sc.system, sc.federation.num_clients, stream(sc.seed, "timing"))
    time_model = TimeModel.from_config(devices, sc.system)
    profile = profile_split_model(build_model(setup))
    return Prepared(sc, setup, dataset, transform, devices, time_model, profile)


def default_out_dir(sc: Scenario, root: str | Path = "runs") -> Path:
    """``runs/<name>-<YYYYmmdd-HHMMSS>``, with ``-2``, ``-3``, ... when that exists (two runs in a second)."""
    base = Path(root) / f"{sc.name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    out, n = base, 1
    while out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


RUN_OUTPUTS = ("config.toml", "summary.json", "metrics.parquet", "events.parquet", "tb", "checkpoints")


class OutDirError(RuntimeError):
    """The run directory is a file, cannot be written, or holds another run (a user error: exit 2)."""


def check_out_dir(out: Path, *, resume: bool = False, overwrite: bool = False) -> None:
    """Refuse ``out`` before anything runs, with the fix; see :func:`run`.

    Refused: a file, a place that cannot be written, and (unless ``resume`` or ``overwrite``) a directory
    that already holds a run's outputs.
    """
    if out.exists() and not out.is_dir():
        raise OutDirError(f"--out {out} is a file, not a directory; choose another --out")
    base = out
    while not base.exists() and base != base.parent:  # the nearest existing folder decides
        base = base.parent
    if not base.is_dir():
        raise OutDirError(f"cannot create the run directory {out}: {base} is a file; choose another --out")
    if not os.access(base, os.W_OK | os.X_OK):
        read_only = hasattr(os, "statvfs") and os.statvfs(base).f_flag & os.ST_RDONLY
        why = "is on a read-only file system" if read_only else "is not writable for this user"
        raise OutDirError(f"cannot write the run directory {out}: {base} {why}; choose another --out")
    if resume:  # the attempt's TensorBoard files are deleted and written again
        refuse_link(out / "tb", "the TensorBoard event files of the attempt it continues")
    if resume or overwrite:
        return
    if checkpoint_files(out / "checkpoints"):
        raise CheckpointError(
            f"{out} already holds a resumable run (checkpoints); nothing was changed in it. Continue it with "
            f"`raysfl run --resume {out}`, pick a new directory with --out, or start over with --overwrite."
        )
    held = [name for name in RUN_OUTPUTS if (out / name).exists()]
    if held:
        interrupted = (run_summary(out) or {}).get("interrupted")  # True, False, or None: no readable summary
        finished = "a run's outputs"
        if interrupted is not None:
            finished = "an interrupted run without checkpoints" if interrupted else "a finished run"
        raise OutDirError(
            f"{out} already holds {finished} ({', '.join(held)}); nothing was changed in it. Choose another "
            "--out, or pass --overwrite to delete those outputs and run again."
        )


def clear_outputs(out: Path) -> None:
    """Delete a previous run's outputs (:data:`RUN_OUTPUTS`) from ``out``; other files stay."""
    for name in RUN_OUTPUTS:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def write_config(prep: Prepared, out: Path, backend: str) -> dict[str, Any]:
    """``config.toml``: the resolved scenario, what ran, and the device table; returns what it wrote."""
    doc = config_doc(prep, backend)
    replace_text(out / "config.toml", dumps_toml(doc))
    return doc


def shown_config(prep: Prepared, out: Path, backend: str) -> dict[str, Any]:
    """What TensorBoard shows of a continued run's configuration.

    Its ``config.toml``, written by its first attempt (commit, version and backend included), or what this
    attempt would write where that file is unreadable.
    """
    from raysfl.run_files import RunDirError, read_config

    try:
        return read_config(out)
    except RunDirError:
        return config_doc(prep, backend)


def config_doc(prep: Prepared, backend: str) -> dict[str, Any]:
    """What ``config.toml`` holds: the resolved scenario, what ran, and the device table (NaN as "")."""
    doc = scenario_to_dict(prep.scenario)
    ds = prep.dataset
    doc["run"] = {
        "raysfl_version": __version__,
        "commit": source_commit(),
        "torch_version": torch.__version__,
        "driver_processor": processor_name(),  # processors can differ in a result's last bits
        "backend": backend,
        "dataset": ds.name,
        "dataset_source": ds.source,
        "synthetic_data": bool(ds.synthetic),
        **({} if ds.release is None else {"dataset_release": ds.release}),  # the official release's content
        "train_samples": int(len(ds.train_y)),
        "test_samples": int(len(ds.test_y)),
        "client_sizes": [int(len(ix)) for ix in prep.setup.client_indices],
        "activation_shape": list(prep.profile.activation_shape),
    }
    doc["devices"] = prep.devices.to_rows()
    return _finite(doc)


def _finite(obj: Any) -> Any:
    """Replace NaN (TOML has nan, but our readers may not) by an empty string in written configs."""
    if isinstance(obj, float) and math.isnan(obj):
        return ""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def _sinks(sc: Scenario, out: Path, config: dict[str, Any] | None) -> list[Sink]:
    """The run's output sinks; ``config`` (``config.toml``'s content) is shown in TensorBoard."""
    sinks: list[Sink] = [MetricsLog(out / "metrics.parquet"), DivergenceNotice()]
    if sc.metrics.events:
        sinks.append(EventLog(out / "events.parquet", schema=event_schema(sc.algorithm_spec.event_columns)))
    if sc.metrics.tensorboard:
        sinks.append(TensorBoardSink(out / "tb", config))
    if sc.metrics.progress:
        sinks.append(ProgressLine(sc.train.global_iterations, sc.metrics.progress_every_s))
    return sinks


def kept_server_device(had: str | None, requested: str) -> str | None:
    """The device a restarted or resumed run's server must use, or ``None`` for ``engine.server_device``.

    Under ``"auto"`` the server keeps the device it had (``had``: where the failed attempt placed it, or
    what the checkpoint recorded), so a run continued on a cluster that gained or lost a GPU computes on
    the device an uninterrupted run would have: a GPU's last bits differ from a CPU's. An explicit
    ``"cpu"`` or ``"cuda"`` is the user's choice and stands.

    Example:
        >>> kept_server_device("cuda:0", "auto"), kept_server_device("cpu", "auto")
        ('cuda', 'cpu')
        >>> kept_server_device("cuda:0", "cpu") is None, kept_server_device(None, "auto") is None
        (True, True)
    """
    if requested != "auto" or not had:
        return None
    return "cuda" if str(had).startswith("cuda") else "cpu"


def local_dispatcher(prep: Prepared, server_device: str | None = None) -> LocalDispatcher:
    """Everything in this process (the determinism reference; unit and integration tests).

    ``server_device`` replaces ``engine.server_device`` (a resumed run keeps the device its server had).
    """
    ds, threads = prep.dataset, prep.scenario.engine.torch_threads
    clients = ClientHost(prep.setup, ds.train_x, ds.train_y, prep.transform, threads)
    eng = prep.scenario.engine
    device = pick_device(server_device or eng.server_device)
    server = ServerHost(prep.setup, ds.test_x, ds.test_y, prep.transform, device, eng.server_threads)
    return LocalDispatcher(clients, server, _time_scale(prep.scenario))


def realtime_lanes_note(sc: Scenario, backend: str) -> str:
    """In realtime mode with fewer pools than concurrent clients, what that does (else ``""``).

    A pool runs its calls one after another and each paced call sleeps out its duration, so the concurrent
    jobs of one pool take the sum of their durations and arrive in the order they were sent, not by device
    speed. On the local backend every call runs in turn.
    """
    concurrent = sc.federation.active_clients
    lanes = 1 if backend == "local" else sc.engine.pools
    if sc.engine.clock != "realtime" or lanes >= concurrent:
        return ""
    where = "the local backend runs every call in turn" if backend == "local" else f"{lanes} pool(s)"
    return (
        f"realtime: {where} for {concurrent} concurrent clients; a pool runs its calls one after another, "
        "so concurrent jobs on one pool take the sum of their durations and arrive in the order they were "
        f"sent. Use engine.pools >= {concurrent} (one per concurrent client) on Ray."
    )


def _time_scale(sc: Scenario) -> float | None:
    """Emulated seconds per wall second in realtime mode; ``None`` for the virtual clock."""
    return sc.engine.time_scale if sc.engine.clock == "realtime" else None


def final_metrics(last: Mapping[str, Any]) -> dict[str, Any]:
    """``summary.json``'s ``final_metrics``: the last evaluation's numbers other than the engine's columns.

    ``accuracy``, ``loss`` and the method's own metrics (a split server's ``train_loss``, the per-kind traffic
    ``bytes_up_*`` / ``load_*``, ``storage_*``, FedASMU's controls): the numbers of the last
    ``metrics.parquet`` row, without ``iteration``, ``t``, ``wall_s`` and the counters, which
    ``summary.json`` gives on their own (as ``global_iterations``, ``emulated_s``, ...). A NumPy scalar of a
    policy's report is read as its number; NaN and infinities (a diverged loss) are ``None``, JSON's
    ``null``, since JSON has no such numbers.
    """
    out: dict[str, Any] = {}
    for key, raw in last.items():
        value = plain_scalar(raw)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if number and key not in REPORT_KEYS + ENGINE_REPORT_KEYS:
            out[key] = value if math.isfinite(value) else None
    return out


def summarize(totals: Totals, wall_s: float, interrupted: bool, prep: Prepared) -> dict[str, Any]:
    """The ``summary.json`` content."""
    accs = [r["accuracy"] for r in totals.evals if "accuracy" in r]
    last = totals.evals[-1] if totals.evals else {}
    return {
        "scenario": prep.scenario.name,
        "algorithm": prep.scenario.algorithm.name,
        "dataset": prep.dataset.name,
        "synthetic_data": bool(prep.dataset.synthetic),
        "final_accuracy": accs[-1] if accs else None,
        "best_accuracy": max(accs) if accs else None,
        "global_iterations": last.get("iteration", 0),
        "emulated_s": last.get("t", 0.0),
        "wall_s": wall_s,
        "events": totals.events,
        "events_per_s": totals.events / wall_s if wall_s > 0 else 0.0,
        "bytes_up": totals.bytes_up,
        "bytes_down": totals.bytes_down,
        "stop_reason": "interrupted" if interrupted else totals.stop_reason,
        "final_metrics": final_metrics(last),
        "interrupted": interrupted,
        "out_dir": "",
        "realtime_postponed_arrivals": totals.postponed,
        "realtime_max_late_s": totals.late_max_s,
        "realtime_max_lag_s": totals.lag_max_s,
    }


LATE_NOTE_WALL_S = 0.5  # realtime mode: falling this far behind the wall clock is worth a note


def realtime_late_note(sc: Scenario, backend: str, totals: Totals) -> str:
    """What falling behind the wall clock did to a realtime run, when by over :data:`LATE_NOTE_WALL_S`.

    Else ``""``. An arrival whose value is not there when due is postponed (:meth:`Coordinator.step`), so
    emulated time runs on without it; an event the coordinator releases late delays every later one.
    """
    scale = _time_scale(sc)
    if scale is None:
        return ""
    late_wall_s = totals.late_max_s / scale
    if max(late_wall_s, totals.lag_max_s) <= LATE_NOTE_WALL_S:
        return ""
    behind = []
    if totals.postponed:
        behind.append(
            f"{totals.postponed} arrival(s) came late, by up to {totals.late_max_s:.3g} emulated s "
            f"({late_wall_s:.3g} wall s)"
        )
    if totals.lag_max_s > 0:
        behind.append(f"events were released up to {totals.lag_max_s:.3g} wall s late")
    remedy = (
        "calls that share a pool ran in turn (the note above)"
        if realtime_lanes_note(sc, backend)
        else "a smaller engine.time_scale asks less of the host"
    )
    return (
        f"realtime: the host did not keep up with engine.time_scale = {scale:g}: {'; '.join(behind)}. "
        f"Emulated times are stretched by that; {remedy}."
    )


def run(
    sc: Scenario,
    out_dir: str | Path | None = None,
    *,
    backend: str = "ray",
    address: str | None = None,
    data_dir: str | None = None,
    resume: bool = False,
    extra_sinks: Sequence[Sink] = (),
    overwrite: bool = False,
) -> dict[str, Any]:
    """Run ``sc`` and write its outputs; returns the summary. ``backend`` is ``"ray"`` or ``"local"``.

    ``out_dir`` must not hold another run's outputs (:data:`RUN_OUTPUTS`): a finished or partial run is
    refused with an :class:`OutDirError`, a resumable one (checkpoints) with a
    :class:`~raysfl.engine.checkpoint.CheckpointError`, nothing changed in either. ``overwrite=True``
    starts the run over instead: once the data is loaded and the cluster answers, those outputs (and only
    those; other files in ``out_dir`` stay) are deleted, so TensorBoard never mixes two runs' event files.
    A path that is a file or cannot be written is an :class:`OutDirError` before anything runs; nothing
    is written until Ray has started or joined the cluster.

    ``extra_sinks`` receive the event and evaluation rows besides the run's own logs (a sweep trial
    reports each evaluation to Ray Tune this way); they are not closed by the run. One with a
    ``resume(state, evals)`` method (:class:`~raysfl.engine.loop.ResumableSink`) is told where a resumed or
    restarted attempt goes on, with ``state = None`` (extra sinks are not saved in checkpoints).

    ``resume``: continue ``out_dir`` from its newest checkpoint (:mod:`raysfl.engine.checkpoint`); the
    final metrics equal those of an uninterrupted run. A worker that dies mid-run (a killed pool process,
    a lost node) makes the run roll back to its newest checkpoint, or to the start when it has none, on
    fresh actors, at most ``engine.max_restarts`` times: the results stay those of an undisturbed run.
    """
    if backend not in ("ray", "local"):
        raise ValueError(f"backend must be 'ray' or 'local', got {backend!r}")
    if sc.engine.kill_pool_at_iteration and backend != "ray":
        raise ConfigError(
            ["engine.kill_pool_at_iteration: kills a Ray pool process; it needs backend 'ray', not 'local'"]
        )
    if resume and overwrite:
        raise ValueError("resume and overwrite exclude each other: continue the run, or start it over")
    out = Path(out_dir) if out_dir is not None else default_out_dir(sc)
    ck_dir = out / "checkpoints"
    check_out_dir(out, resume=resume, overwrite=overwrite)
    ck = resumed = require_checkpoint(out) if resume else None
    scenario_doc = _finite(scenario_to_dict(sc))
    if ck is not None:
        check_same_scenario(ck, scenario_doc, ck["path"])
        done = finished_summary(out)
        if done is not None:  # resuming a finished run changes nothing
            note = f"{out} has finished ({done.get('stop_reason')}); nothing to resume, outputs unchanged"
            print(f"raysfl: {note}", file=sys.stderr)
            return {**done, "out_dir": str(out)}
    if sc.engine.precision == "bfloat16" and not native_bfloat16():
        print(f"raysfl: {EMULATED_BFLOAT16}", file=sys.stderr)
    lanes_note = realtime_lanes_note(sc, backend)
    if lanes_note:
        print(f"raysfl: {lanes_note}", file=sys.stderr)
    with profiling.section("setup.prepare"):
        prep = prepare(sc, data_dir)
    if backend == "ray":  # start or join Ray before writing: an unreachable cluster leaves no folder
        from raysfl.engine.cluster import ensure_ray

        with profiling.section("setup.ray_init"):
            ensure_ray(address)
    if overwrite:
        clear_outputs(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutDirError(f"cannot create the run directory {out}: {err.strerror or err}") from None
    written = write_config(prep, out, backend) if ck is None else None
    shown: dict[str, Any] | None = None  # the configuration TensorBoard shows
    if prep.scenario.metrics.tensorboard:
        shown = written if written is not None else shown_config(prep, out, backend)
    wall0, restarts = time.monotonic(), 0
    lost: WorkerLostError | None = None  # the loss that caused the latest restart
    wall_before = checkpoint_wall_s(ck) if ck is not None else 0.0  # a resumed run's earlier attempts
    placed: dict[str, Any] = {}  # where the first attempt's actors went: a restart keeps the server's device
    on = f" --address {address}" if address else ""  # for the advice of a run that gives up
    while True:
        try:
            had = placed.get("device") if restarts else (ck or {}).get("server_device")
            kept = kept_server_device(had, sc.engine.server_device)
            attempt = _attempt(
                prep, out, backend, address, scenario_doc, ck, restarts == 0, tuple(extra_sinks), kept,
                placed if not restarts else None, shown,
            )  # fmt: skip
            break
        except WorkerLostError as err:
            lost = err
            restarts += 1
            latest = load_latest(ck_dir)
            if restarts > sc.engine.max_restarts:
                then = (
                    f"continue it from {Path(latest['path']).name} with `raysfl run --resume {out}{on}`"
                    if latest
                    else "it has no checkpoint to continue from (engine.checkpoint_every), so run it again"
                )
                raise RunFailedError(
                    f"{err}; gave up after engine.max_restarts = {sc.engine.max_restarts} restarts. The run "
                    f"directory keeps what was written; {then}."
                ) from err
            ck = latest
            where = f"checkpoint {Path(ck['path']).name}" if ck else "the start (no checkpoint yet)"
            print(f"raysfl: {err}; restarting the workers from {where} (restart {restarts})", file=sys.stderr)
        except BaseException as err:  # a refusal, or ^C while the workers start
            if restarts and isinstance(err, ServerDeviceError):  # the server's GPU left with its node
                raise RunFailedError(
                    f"{lost}; the restart needs a GPU for the server, which ran on one, and the cluster has "
                    f"none left ({err}). The run directory keeps what was written; continue it from its last "
                    f"checkpoint with `raysfl run --resume {out}{on}` once the cluster has a GPU again, or "
                    'add engine.server_device="cpu" to continue on a CPU (other last bits).'
                ) from err
            if not restarts and ck is not None and kept == "cuda" and isinstance(err, ServerDeviceError):
                raise ServerDeviceError(
                    [
                        f"engine.server_device: 'auto' resumes {out} on the device its server had, a GPU "
                        f"({Path(ck['path']).name}), and this cluster has none; resume it where there is a "
                        'GPU, or add engine.server_device="cpu" to continue on a CPU (other last bits)'
                    ]
                ) from err
            if restarts == 0 and ck is None and not _ran_anything(out):  # a fresh run's first attempt
                clear_outputs(out)  # a run stopped while it was set up leaves the folder free to run again
            raise
    totals, placement, interrupted = attempt
    late_note = realtime_late_note(sc, backend, totals)
    if late_note:
        print(f"raysfl: {late_note}", file=sys.stderr)
    summary = summarize(totals, wall_before + time.monotonic() - wall0, interrupted, prep)
    summary["out_dir"] = str(out)
    summary["placement"] = placement
    summary["restarts"] = restarts
    summary["resumed_from"] = Path(resumed["path"]).name if resumed else None  # --resume's checkpoint
    summary["restarted_from"] = (Path(ck["path"]).name if ck else "start") if restarts else None
    replace_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    return summary


def _ran_anything(out: Path) -> bool:
    """Whether a run in ``out`` got as far as an evaluation or a checkpoint.

    A run that did not holds nothing in its outputs but its configuration and empty logs.
    """
    checkpoints = out / "checkpoints"
    return (out / "metrics.parquet").exists() or (checkpoints.is_dir() and any(checkpoints.iterdir()))


class RunFailedError(RuntimeError):
    """Workers kept dying past ``engine.max_restarts``."""


def _attempt(
    prep: Prepared,
    out: Path,
    backend: str,
    address: str | None,
    scenario_doc: dict[str, Any],
    ck: dict[str, Any] | None,
    inject_fault: bool,
    extra_sinks: tuple[Sink, ...] = (),
    server_device: str | None = None,
    placed: dict[str, Any] | None = None,
    shown: dict[str, Any] | None = None,
) -> tuple[Totals, dict[str, Any], bool]:
    """One go at the run on fresh workers, from ``ck`` (or the start); returns (totals, placement, ^C).

    ``inject_fault`` is true on the first attempt only (fault injection fires once per run). ``shown`` is
    the configuration TensorBoard shows (``config.toml``).
    ``server_device`` replaces ``engine.server_device`` (a restart keeps the server's device); ``placed``
    receives where the actors were placed as soon as they are, so a restart knows it should the attempt fail.
    """
    sc = prep.scenario
    dispatcher: Dispatcher
    with profiling.section("setup.backend"):
        if backend == "ray":
            from raysfl.engine.cluster import ray_dispatcher

            dispatcher = ray_dispatcher(prep, address, server_device)
        else:
            dispatcher = local_dispatcher(prep, server_device)
    sinks: list[Sink] = []
    try:
        with profiling.section("setup.backend"):
            placement = dispatcher.placement()
        if placed is not None:
            placed.update(placement)
        processors_note = mixed_processors_note(placement)
        if processors_note:
            print(f"raysfl: {processors_note}", file=sys.stderr)
        rng = stream(sc.seed, "policy")
        spec = sc.algorithm_spec
        assert spec.make_policy is not None  # check_spec refuses a spec without one
        policy = check_logic(spec.make_policy(prep.setup, prep.time_model, prep.profile, rng), Policy, spec)
        clock = RealtimeClock(sc.engine.time_scale) if sc.engine.clock == "realtime" else VirtualClock()
        sinks = _sinks(sc, out, shown)
        coordinator = Coordinator(
            policy,
            dispatcher,
            [*sinks, *extra_sinks],
            clock,
            log_columns=spec.event_columns,
            num_clients=prep.setup.num_clients,
        )
        externals = {"setup": prep.setup, "time_model": prep.time_model, "profile": prep.profile}
        eng = sc.engine
        checkpointer = Checkpointer(
            out / "checkpoints",
            eng.checkpoint_every,
            eng.keep_checkpoints,
            scenario_doc,
            externals,
            sinks,
            extra_sinks,  # resumed with the run's sinks (a sweep's Tune reports), never saved
            server_device=str(placement.get("device", "")),
        )
        if inject_fault and eng.kill_pool_at_iteration:
            checkpointer.hooks.append(_pool_killer(eng.kill_pool_at_iteration))
        if ck is not None:
            checkpointer.restore(coordinator, ck)
        elif not inject_fault:  # a restart from the start: forget what the failed attempt logged
            for s in [*sinks, *extra_sinks]:
                if isinstance(s, ResumableSink):
                    s.resume(None, [])
        interrupted = False

        def after_event(coord: Coordinator) -> None:
            interrupt.check()  # a Ctrl-C that a finaliser swallowed ends the run here
            checkpointer.after_event(coord)

        try:
            with remembered_interrupts() as interrupt:
                totals = coordinator.run(resumed=ck is not None, after_event=after_event)
        except KeyboardInterrupt:
            interrupted = True
            totals = coordinator.totals
        if "pool_calls" in placement:  # least-loaded placement: what each pool ran in this attempt
            final = dispatcher.placement()
            placement.update(pool_calls=final["pool_calls"], client_moves=final["client_moves"])
        return totals, placement, interrupted
    finally:
        with profiling.section("teardown"):
            for s in sinks:
                s.close()
            dispatcher.close()


def _pool_killer(at_iteration: int) -> Any:
    """Fault injection (``engine.kill_pool_at_iteration``): SIGKILL pool 0 once, at that iteration."""
    done = False

    def hook(coordinator: Coordinator, iteration: int) -> None:
        nonlocal done
        if not done and iteration >= at_iteration:
            done = True
            from raysfl.engine.ray_backend import RayDispatcher

            dispatcher = coordinator.dispatcher
            assert isinstance(dispatcher, RayDispatcher)  # the scenario check refuses it on the local backend
            pid = dispatcher.kill_pool(0)
            print(
                f"raysfl: fault injection: killed client pool 0 (pid {pid}) at iteration {iteration}",
                file=sys.stderr,
            )

    return hook
