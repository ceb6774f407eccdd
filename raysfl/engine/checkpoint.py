"""Checkpoints of a whole run, and resuming from them.

A checkpoint is one file, ``RUN_DIR/checkpoints/ckpt-<iteration>.pt``, written atomically every
``engine.checkpoint_every`` global iterations. It holds everything the run needs to continue exactly as
if it had never stopped:

    clock, event heap (with its tie-break counter), totals and every evaluation so far,
    the policy (its bookkeeping and RNG streams), the server logic (models, optimizer, buffers,
    statistics), every client state created so far, each pool's client logic and torch RNG state,
    the values of the live slots (activations and gradients in flight), and the sinks' state
    (the sealed event-log segments, the TensorBoard history).

It is written with :func:`raysfl.engine.snapshot.save_tree` and read with ``torch.load(weights_only=True)``:
plain data and tensors, no code. A file that references code, or whose trees name a class outside the
snapshot allow-list (:func:`raysfl.engine.snapshot.check_tree`), is refused before anything is built from
it; a file that cannot be read (a torn write) is passed over for the one before, with a note on stderr.
The checkpoint taken at the event that stopped the run records that, so resuming from it ends there too
(the run never goes past its budget); resuming a run that finished (``summary.json`` says so) changes
nothing. It also stores the resolved scenario and its fingerprint, so
``raysfl run --resume RUN_DIR`` needs no scenario file and a checkpoint of another scenario is refused.
The fingerprint leaves out the ``engine`` and ``metrics`` sections: those do not change results, so a
run may resume on another number of pools or with TensorBoard switched off. The exception is
``engine.precision``: a bfloat16 run resumes only in bfloat16, and a float32 run only in float32.
A scenario stored before an option was renamed (an old key kept by ``config.aliases``, an old value
spelling kept by ``synonyms``) is read again by today's schema before it is called another scenario
(:func:`same_scenario`).
"""

from __future__ import annotations

import hashlib
import json
import pickle
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from raysfl.api import Policy
from raysfl.config import dumps_toml
from raysfl.engine.loop import CheckpointingSink, ResumableSink
from raysfl.engine.snapshot import SnapshotError, capture, check_tree, load_tree, rebuild, save_tree
from raysfl.safe_write import replace_text

FORMAT = 1
SCENARIO_FILE = "scenario.toml"  # the resolved scenario, beside the checkpoints (read by --resume)
SUMMARY_FILE = "summary.json"  # written when a run ends (runner.run)
NOT_RESULT_SECTIONS = ("engine", "metrics", "name")
RESULT_ENGINE_FIELDS = {"precision": "float32"}  # engine fields that do change results, with their defaults
TREE_KEYS = ("queue", "totals", "due", "policy", "backend", "sinks")  # the snapshot trees of a checkpoint
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_UNSAFE_ADVICE = ("weights_only", "safe_globals", "trust")  # torch's advice to load code: never repeated


class CheckpointError(RuntimeError):
    """A checkpoint is missing, unreadable or belongs to another scenario (a user error: exit 2)."""


def result_fields(scenario_doc: dict[str, Any]) -> dict[str, Any]:
    """The scenario without the sections that do not change results.

    The :data:`RESULT_ENGINE_FIELDS` do change them (``engine.precision``: bfloat16 computes with 8
    significant bits), so each stays in where it is not its default; a scenario at the defaults keeps the
    fingerprint it had before those options existed.
    """
    doc = {k: v for k, v in scenario_doc.items() if k not in NOT_RESULT_SECTIONS}
    engine = scenario_doc.get("engine", {})
    changed = {k: engine[k] for k, d in RESULT_ENGINE_FIELDS.items() if engine.get(k, d) != d}
    if changed:
        doc["engine"] = changed
    return doc


def fingerprint(scenario_doc: dict[str, Any]) -> str:
    """SHA-256 of the resolved scenario's fields that change results (:func:`result_fields`)."""
    return hashlib.sha256(dumps_toml(result_fields(scenario_doc)).encode()).hexdigest()


def current_form(scenario_doc: dict[str, Any]) -> dict[str, Any] | None:
    """A stored resolved scenario as the current schema resolves it, or ``None`` if it no longer loads.

    A scenario written before an option was renamed stores the old key or value spelling (FedAsync's
    ``a``, FedBuff's ``"none"``); loaded again, it resolves to what the same scenario resolves to now.
    """
    from raysfl.config import ConfigError
    from raysfl.engine.runner import _finite
    from raysfl.scenario import scenario_from_dict, scenario_to_dict

    try:
        return _finite(scenario_to_dict(scenario_from_dict(scenario_doc)))
    except (ConfigError, ValueError):
        return None


def same_scenario(stored: dict[str, Any], scenario_doc: dict[str, Any]) -> bool:
    """Whether a stored resolved scenario and ``scenario_doc`` give the same results.

    Equal fingerprints, or, for a scenario stored by an older schema, equal fingerprints once the stored
    one is resolved again (:func:`current_form`).
    """
    target = fingerprint(scenario_doc)
    if fingerprint(stored) == target:
        return True
    now = current_form(stored)
    return now is not None and fingerprint(now) == target


def _flatten(doc: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _flatten(v, f"{prefix}{k}.")
    else:
        yield prefix.rstrip("."), doc


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """``key: A != B`` for every result-relevant field where two scenario documents differ."""
    default = {f"engine.{k}": v for k, v in RESULT_ENGINE_FIELDS.items()}  # result_fields leaves them out
    fa = {**default, **dict(_flatten(result_fields(a)))}
    fb = {**default, **dict(_flatten(result_fields(b)))}
    keys = sorted(fa.keys() | fb.keys())
    return [f"{k}: {fa.get(k)!r} != {fb.get(k)!r}" for k in keys if fa.get(k) != fb.get(k)]


def checkpoint_files(ck_dir: Path) -> list[Path]:
    """The complete checkpoint files of a run, oldest first."""
    return sorted(ck_dir.glob("ckpt-*.pt")) if ck_dir.is_dir() else []


def _load_problem(err: Exception) -> tuple[str, bool]:
    """What went wrong reading a checkpoint, in one line, and whether the file references code.

    torch's own message advises loading the file with ``weights_only=False`` or allow-listing its globals;
    that would run whatever the file names, so those sentences are left out.
    """
    text = _ANSI.sub("", str(err))
    code = isinstance(err, pickle.UnpicklingError) and "GLOBAL" in text
    detail = text.split("WeightsUnpickler error:", 1)[1] if "WeightsUnpickler error:" in text else text
    line = next((ln.strip() for ln in detail.splitlines() if ln.strip()), "")
    sentences = re.split(r"(?<=\.)\s+", line)
    kept = [x for x in sentences if not any(word in x for word in _UNSAFE_ADVICE)]
    return f"{type(err).__name__}: {kept[0][:200] if kept else ''}".rstrip(": "), code


def _refuse(path: Path, why: str) -> CheckpointError:
    return CheckpointError(
        f"{path}: refused: {why}. raysfl writes only plain data and its own state classes into checkpoints, "
        "so this file was not written by raysfl (or by a raysfl version with other state classes); it was "
        "not used and nothing was run or changed. Remove it to resume from an earlier checkpoint, or run the "
        "scenario into a new --out directory."
    )


def load_latest(ck_dir: Path) -> dict[str, Any] | None:
    """The newest readable checkpoint; ``None``: none.

    A damaged newest file (unreadable, or not a checkpoint) falls back to the one before, saying so on
    stderr. A file that references code or names a class outside the snapshot allow-list is refused
    (:class:`CheckpointError`): that is not damage, and nothing is built from it.
    """
    problems = []
    for path in reversed(checkpoint_files(ck_dir)):
        try:
            ck = load_tree(path)
        except Exception as err:  # noqa: BLE001 - any unreadable file: report and try the previous one
            problem, code = _load_problem(err)
            if code:
                raise _refuse(path, f"it references Python code ({problem})") from None
            problems.append(f"{path.name}: {problem}")
            continue
        if not isinstance(ck, dict) or ck.get("format") != FORMAT:
            problems.append(f"{path.name}: not a raysfl checkpoint of format {FORMAT}")
            continue
        try:
            check_tree({k: ck.get(k) for k in TREE_KEYS})
        except SnapshotError as err:
            raise _refuse(path, str(err)) from None
        ck["path"] = str(path)
        if problems:
            print(
                f"raysfl: passing over damaged checkpoint(s) in {ck_dir} ({'; '.join(problems)}); "
                f"resuming from {path.name}",
                file=sys.stderr,
            )
        return ck
    if problems:
        raise CheckpointError(
            f"no readable checkpoint in {ck_dir} ({'; '.join(problems)}). Delete the damaged files to start "
            "over in this directory, or run the scenario into a new --out directory."
        )
    return None


def require_checkpoint_dir(run_dir: Path) -> Path:
    """``run_dir/checkpoints`` when it holds a checkpoint, else a :class:`CheckpointError` saying why."""
    if not run_dir.is_dir():
        raise CheckpointError(f"--resume {run_dir}: no such run directory")
    ck_dir = run_dir / "checkpoints"
    if not checkpoint_files(ck_dir):
        done = finished_summary(run_dir)
        every = _recorded_checkpoint_every(run_dir)
        if done is not None:
            why = f"it finished ({done.get('stop_reason')}); there is nothing to resume, outputs unchanged."
        elif every:
            why = (
                f"it stopped before its first one (engine.checkpoint_every = {every}: the first is written "
                f"after global iteration {every}). Start it over with `raysfl run SCENARIO --out {run_dir} "
                "--overwrite`."
            )
        else:
            why = (
                "checkpoints are written when engine.checkpoint_every > 0, e.g. `raysfl run SCENARIO "
                "engine.checkpoint_every=5`."
            )
        none = f"the run wrote no checkpoint (no ckpt-*.pt in {ck_dir})"
        raise CheckpointError(f"--resume {run_dir}: {none}; {why}")
    return ck_dir


def _recorded_checkpoint_every(run_dir: Path) -> int:
    """``engine.checkpoint_every`` as the run's ``config.toml`` records it (0 when it cannot be read)."""
    from raysfl.run_files import RunDirError, read_config

    try:
        every = read_config(run_dir).get("engine", {}).get("checkpoint_every", 0)
    except RunDirError:
        return 0
    return every if isinstance(every, int) and every > 0 else 0


def require_checkpoint(run_dir: Path) -> dict[str, Any]:
    """The newest readable checkpoint of ``run_dir`` or a :class:`CheckpointError` saying how to get one."""
    ck = load_latest(require_checkpoint_dir(run_dir))
    assert ck is not None  # load_latest raises when files exist but none is readable
    return ck


def run_summary(run_dir: Path) -> dict[str, Any] | None:
    """``run_dir``'s ``summary.json`` (finished or interrupted); ``None`` when missing or unreadable."""
    try:
        summary = json.loads((run_dir / SUMMARY_FILE).read_text())
    except (OSError, ValueError, RecursionError):  # RecursionError: nesting thousands deep
        return None
    return summary if isinstance(summary, dict) else None


def finished_summary(run_dir: Path) -> dict[str, Any] | None:
    """The ``summary.json`` of a run that ended (its budget, its time limit, no events left); else ``None``.

    A run stopped by ^C writes a summary marked ``interrupted``: it can still be continued.
    """
    summary = run_summary(run_dir)
    return summary if summary is not None and not summary.get("interrupted", True) else None


LOG_SWITCHES = {"events": "events.parquet", "tensorboard": "tb/"}  # metrics.* that a resume must keep


def check_same_scenario(ck: dict[str, Any], scenario_doc: dict[str, Any], where: str) -> None:
    """Refuse to resume ``ck`` with a scenario whose result-relevant fields differ, or with a log switched.

    A log of :data:`LOG_SWITCHES` switched on would lack the rows before the checkpoint; one switched off
    would keep the interrupted attempt's rows past it.
    """
    if ck["fingerprint"] != fingerprint(scenario_doc) and not same_scenario(ck["scenario"], scenario_doc):
        diff = differences(ck["scenario"], scenario_doc)
        shown = "; ".join(diff[:6]) + (f"; and {len(diff) - 6} more" if len(diff) > 6 else "")
        raise CheckpointError(
            f"{where} was written by another scenario ({ck['scenario'].get('name', '?')!r}): {shown} "
            "(checkpoint != given). Resume with `raysfl run --resume RUN_DIR` alone (the checkpoint stores "
            "its scenario; engine.* overrides are allowed), or run the new scenario into a new --out "
            "directory."
        )
    for field, log in LOG_SWITCHES.items():
        was = ck["scenario"].get("metrics", {}).get(field, True)
        now = scenario_doc.get("metrics", {}).get(field, True)
        if was != now:
            raise CheckpointError(
                f"metrics.{field}: {where} was written with metrics.{field} = {str(was).lower()}; a resume "
                f"must keep it, or {log} would {'miss what came before' if now else 'keep rows past'} the "
                "checkpoint. Resume without that override, or run the scenario into a new --out directory."
            )


class Checkpointer:
    """Decides when to checkpoint, writes checkpoints, restores a coordinator from one.

    ``externals`` are the driver objects a fresh build recreates (the run setup, the time model, the
    model profile): the policy refers to them, a checkpoint stores only their names. ``sinks`` are the
    run's own logs, saved in checkpoints and restored from them; ``extra_sinks`` (a sweep's Tune reports)
    are never saved, and a restore tells those that can resume where the run goes on, with no state.
    """

    def __init__(
        self,
        ck_dir: Path,
        every: int,
        keep: int,
        scenario_doc: dict[str, Any],
        externals: dict[str, Any],
        sinks: list[Any],
        extra_sinks: Sequence[Any] = (),
        server_device: str = "",
    ) -> None:
        self.dir = ck_dir
        self.server_device = server_device  # recorded, so a resumed run keeps it (runner.kept_server_device)
        self.every = every
        self.keep = keep
        self.scenario_doc = scenario_doc
        self.fingerprint = fingerprint(scenario_doc)
        self.externals = externals
        self.sinks = sinks
        self.extra_sinks = list(extra_sinks)
        self.next_at = every
        self.hooks: list[Any] = []  # called with (coordinator, iteration) after every event

    def after_event(self, coordinator: Any) -> None:
        """Checkpoint when the policy's global iteration reached the next multiple of ``every``."""
        if not self.every and not self.hooks:
            return
        iteration = global_iteration(coordinator.policy)
        for hook in self.hooks:
            hook(coordinator, iteration)
        if self.every and iteration >= self.next_at:
            self.next_at = (iteration // self.every + 1) * self.every
            self.save(coordinator, iteration)

    def save(self, coordinator: Any, iteration: int) -> Path:
        """Write ``ckpt-<iteration>.pt`` (after delivering every outstanding report) and prune old ones."""
        coordinator.drain()
        self.dir.mkdir(parents=True, exist_ok=True)
        tag = f"{iteration:06d}"
        try:
            tree = {
                "format": FORMAT,
                "fingerprint": self.fingerprint,
                "scenario": self.scenario_doc,
                "iteration": iteration,
                "next_at": self.next_at,
                "t": coordinator.clock.now,
                "wall_s": coordinator.elapsed_wall(),  # a resumed run's wall_s goes on from here
                "server_device": self.server_device,  # where the server computed: a resumed run keeps it
                "stopped": coordinator.stopped,  # taken at the event that stopped the run: it ends here
                "queue": capture(coordinator.queue.snapshot()),
                "totals": capture(coordinator.totals),
                "due": capture(coordinator.due),  # realtime mode: postponed arrivals' first due times
                "policy": capture(coordinator.policy, self.externals, root="policy"),
                "backend": coordinator.dispatcher.snapshot(),
                "sinks": capture({type(s).__name__: s.checkpoint(self.dir, tag) for s in self._sinks()}),
            }
        except SnapshotError as err:
            raise CheckpointError(f"cannot checkpoint this run: {err}") from None
        scenario_file = self.dir / SCENARIO_FILE
        if not scenario_file.exists():  # first: a process killed after the first checkpoint can --resume
            replace_text(scenario_file, dumps_toml(self.scenario_doc))
        path = self.dir / f"ckpt-{tag}.pt"
        save_tree(tree, path)
        for old in checkpoint_files(self.dir)[: -self.keep]:
            old.unlink()
        return path

    def _sinks(self) -> list[Any]:
        return [s for s in self.sinks if isinstance(s, CheckpointingSink)]

    def restore(self, coordinator: Any, ck: dict[str, Any]) -> None:
        """Put the coordinator (clock, heap, totals, policy, workers, sinks) back to checkpoint ``ck``.

        A checkpoint taken at the event that stopped the run restores the coordinator as stopped, so the
        resumed run ends exactly where the uninterrupted one did.
        """
        coordinator.clock.now = float(ck["t"])  # a realtime clock paces on from here (Coordinator.run)
        try:
            coordinator.queue.restore(rebuild(ck["queue"]))
            coordinator.totals = rebuild(ck["totals"])
            coordinator.due = rebuild(ck["due"]) if "due" in ck else {}  # older checkpoints lack it
            coordinator.policy = rebuild(ck["policy"], self.externals, target=coordinator.policy)
            coordinator.dispatcher.restore(ck["backend"])
            sink_states = rebuild(ck["sinks"])
        except SnapshotError as err:
            raise CheckpointError(f"cannot restore {ck.get('path', 'the checkpoint')}: {err}") from None
        coordinator.stopped = bool(ck.get("stopped", False))
        coordinator.continue_wall(checkpoint_wall_s(ck, coordinator.totals.evals))
        for sink in self.sinks:
            if isinstance(sink, ResumableSink):
                sink.resume(sink_states.get(type(sink).__name__), coordinator.totals.evals)
        for sink in self.extra_sinks:
            if isinstance(sink, ResumableSink):
                sink.resume(None, coordinator.totals.evals)
        self.next_at = int(ck["next_at"])


def checkpoint_wall_s(ck: dict[str, Any], evals: list[dict[str, Any]] | None = None) -> float:
    """The run's wall seconds when checkpoint ``ck`` was taken.

    A checkpoint written before they were recorded gives its last evaluation's, else 0.
    """
    if "wall_s" in ck:
        return float(ck["wall_s"])
    return float(evals[-1].get("wall_s", 0.0)) if evals else 0.0


def global_iteration(policy: Policy) -> int:
    """The policy's count of global iterations (part of the :class:`raysfl.api.Policy` protocol)."""
    return int(policy.global_iteration())
