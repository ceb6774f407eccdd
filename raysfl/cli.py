"""The ``raysfl`` command line: parse arguments, call the library, turn known errors into exit code 2.

Commands:
    raysfl list [WHAT]                              scenarios, datasets, models, algorithms, device profiles
    raysfl list algorithms NAME...                  these methods with their options (a built-in or
                                                    entry-point name, or an import path module:SPEC)
    raysfl validate SCENARIO [key=value ...]        check a scenario and print its resolved form (--data:
                                                    load, partition and build it as a run does)
    raysfl describe model NAME [--split S]          parameters, FLOPs, activation size of a split model
    raysfl describe devices SCENARIO [key=value]    the device table the scenario draws
    raysfl describe method NAME...                  = raysfl list algorithms NAME...
    raysfl data check NAME [--data-dir D]           find and verify a dataset
    raysfl run SCENARIO... [key=value ...]          run scenarios (files, directories, globs)
    raysfl compare RUN_DIR... [--target 0.6]        accuracy, time to target, bytes, paper numbers

This module holds no logic of its own: errors the user can fix (bad scenario, missing data, unknown
names) print one paragraph to stderr and exit with status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import glob
import shlex
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from raysfl.config import ConfigError, dumps_toml, read_toml

EXIT_USAGE = 2
SCENARIO_ROOT = Path(__file__).resolve().parent.parent / "scenarios"


class UsageError(RuntimeError):
    """A problem with the user's input that the user can fix; printed without a traceback."""


class _Parser(argparse.ArgumentParser):
    """A parser whose commands take options and ``key=value`` overrides in any order.

    Plain argparse ends a ``nargs="*"`` positional at the first option, so ``run S --out D k=v`` would
    reject ``k=v``; each command (a parser without subcommands) parses intermixed instead.
    """

    _mixing = False

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:  # noqa: D102
        if self._mixing or self._subparsers is not None:  # subcommands cannot be intermixed
            return super().parse_known_args(args, namespace)
        self._mixing = True  # parse_known_intermixed_args calls back into parse_known_args
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._mixing = False


SWEEP_SUFFIX = ".sweep.toml"  # sweep files (raysfl sweep) live beside scenarios but are not scenarios


def _scenario_files(sweeps: bool = False) -> list[Path]:
    """Shipped scenario files (or, with ``sweeps``, the shipped sweep files)."""
    found = sorted(SCENARIO_ROOT.rglob("*.toml")) if SCENARIO_ROOT.is_dir() else []
    return [p for p in found if p.name.endswith(SWEEP_SUFFIX) == sweeps]


def _print_scenario_folders() -> None:
    """The shipped scenarios as ``raysfl list`` shows them: top-level files by name, folders by count.

    Hundreds of files would push every other registry off the screen; ``raysfl list scenarios`` names them.
    """
    files, sweeps = _scenario_files(), _scenario_files(sweeps=True)

    def count(n_files: int, n_sweeps: int) -> str:
        named = ((n_files, "scenario"), (n_sweeps, "sweep"))
        return ", ".join(f"{n} {word}{'' if n == 1 else 's'}" for n, word in named if n)

    print(f"scenarios ({count(len(files), len(sweeps))}; `raysfl list scenarios` names each):")
    counts: dict[str, list[int]] = {}
    for kind, paths in enumerate((files, sweeps)):
        for path in paths:
            rel = path.relative_to(SCENARIO_ROOT.parent)
            if len(rel.parts) == 2:  # scenarios/default.toml
                print(f"  {rel}")
                continue
            counts.setdefault(f"{rel.parts[0]}/{rel.parts[1]}/", [0, 0])[kind] += 1
    for folder, (n_files, n_sweeps) in sorted(counts.items()):
        print(f"  {folder:<28} {count(n_files, n_sweeps)}")


def cmd_list(args: argparse.Namespace) -> int:
    """Print the registries: scenarios, datasets, models, algorithms, device profiles."""
    import dataclasses

    from raysfl.algorithms import ALGORITHMS
    from raysfl.config import option_meta
    from raysfl.data.registry import DATASETS
    from raysfl.models.zoo import MODELS
    from raysfl.system.config import ComputeConfig, LinkConfig

    what = args.what
    if args.names:
        if what != "algorithms":
            raise UsageError(f"list {what}: takes no names (only `raysfl list algorithms NAME...` does)")
        _list_named_methods(args.names)
        return 0
    if what == "all":
        _print_scenario_folders()
    if what == "scenarios":
        print("scenarios:")
        for path in _scenario_files():
            print(f"  {path.relative_to(SCENARIO_ROOT.parent)}")
        print("sweeps (raysfl sweep FILE):")
        for path in _scenario_files(sweeps=True):
            print(f"  {path.relative_to(SCENARIO_ROOT.parent)}")
    if what in ("all", "datasets"):
        print("datasets:")
        for name, meta in DATASETS.items():
            shape = f"{meta.channels}×{meta.image_size}×{meta.image_size}, {meta.num_classes} classes"
            print(f"  {name:<14} {meta.title} ({shape})")
    if what in ("all", "models"):
        print("models:")
        for name, entry in MODELS.items():
            aux = f"; aux heads {', '.join(entry.aux_heads)}" if entry.aux_heads else ""
            splits = ", ".join(entry.splits)
            print(f"  {name:<16} splits {splits} (default {entry.default_split}){aux}: {entry.description}")
    if what in ("all", "algorithms"):
        print("algorithms:")
        for name, spec in ALGORITHMS.items():
            print(f"  {name:<14} [{spec.family}] {spec.description} ({spec.source})")
        _list_plugins()
    if what in ("all", "devices"):
        print("device profiles:")
        for cls, section in ((ComputeConfig, "system.compute.kind"), (LinkConfig, "system.link.kind")):
            kind = next(f for f in dataclasses.fields(cls) if f.name == "kind")
            print(f"  {section}: {', '.join(option_meta(kind).choices or ())}")
    return 0


def _list_named_methods(names: Sequence[str], command: str = "list algorithms") -> None:
    """Each named method (built in, entry point or import path) as ``list algorithms`` shows it, with options.

    A name that names no method raises :class:`UsageError` (one line, naming it and ``command``) before
    anything is printed.
    """
    from raysfl.config import describe_options
    from raysfl.methods import UnknownAlgorithmError, resolve

    specs = []
    for name in names:
        try:
            specs.append((name, resolve(name)))
        except UnknownAlgorithmError as err:
            why = "; ".join(p.removeprefix("algorithm.name: ") for p in err.problems)
            raise UsageError(f"{command}: {why}") from None
    print("algorithms:")
    for name, spec in specs:
        found = "" if name == spec.name else f"; {name}"
        print(f"  {spec.name:<14} [{spec.family}] {spec.description} ({spec.source}{found})")
        print(f"    options ([algorithm.params], {spec.params.__name__}):")
        for line in describe_options(spec.params):
            print(f"      {line}")


def _list_plugins() -> None:
    """The methods installed packages offer (entry points ``raysfl.algorithms``), each loaded and checked."""
    from raysfl.algorithms import ALGORITHMS
    from raysfl.methods import ENTRY_POINT_GROUP, UnknownAlgorithmError, plugin_entry_points, resolve

    plugins = {n: ep for n, ep in plugin_entry_points().items() if n not in ALGORITHMS}
    if not plugins:
        return
    print(f"installed methods (entry points {ENTRY_POINT_GROUP!r}):")
    for name, ep in plugins.items():
        try:
            spec = resolve(name)
        except UnknownAlgorithmError as err:
            print(f"  {name:<14} unusable ({ep.value}): {'; '.join(err.problems)}")
            continue
        print(f"  {name:<14} [{spec.family}] {spec.description} ({spec.source}; {ep.value})")


def shipped(item: str) -> Path:
    """``item`` as given when it exists here, else the shipped scenario (or sweep, folder) it names.

    ``raysfl list`` prints shipped scenarios as ``scenarios/...``; that name, and the same without
    ``scenarios/``, find them from any working directory.
    """
    path = Path(item)
    if path.exists():
        return path
    for root in (SCENARIO_ROOT, SCENARIO_ROOT.parent):
        if (root / item).exists():
            return root / item
    return path


def _load(path: str, overrides: Sequence[str]):  # noqa: ANN202 - Scenario imported lazily
    """Load and validate a scenario, its devices too: a bad trace file or link option names the file."""
    return _load_with_devices(path, overrides)[0]


def _load_with_devices(path: str, overrides: Sequence[str]) -> tuple[Any, Any]:
    """The scenario (:func:`_load`) and the device table its run draws."""
    from raysfl.scenario import load_scenario

    source = shipped(path)
    sc = load_scenario(source, overrides)
    return sc, _draw_devices(sc, str(source))


def _draw_devices(sc, source: str):  # noqa: ANN001, ANN202 - Scenario, DeviceTable imported lazily
    """The device table the run of ``sc`` draws; a problem (trace file, rates) names the scenario ``source``.

    Drawing reads ``system.trace_file`` and computes every rate from the link options, so a scenario whose
    devices cannot be drawn is refused before anything runs, as one paragraph under the scenario's name.
    """
    from raysfl.engine.rng import stream
    from raysfl.system.profiles import draw_devices

    try:
        return draw_devices(sc.system, sc.federation.num_clients, stream(sc.seed, "timing"))
    except ConfigError as err:
        raise ConfigError(err.problems, source=source) from None


def cmd_validate(args: argparse.Namespace) -> int:
    """Validate a scenario; print its resolved TOML with ``--print``.

    With ``--data`` also what depends on the data, exactly as a run prepares it before any worker starts:
    the dataset is found and loaded, partitioned over the K clients and the model is built on its shapes.
    """
    from raysfl.scenario import scenario_to_dict

    sc = _load(args.scenario, args.overrides)
    prepared = None
    if args.data or args.data_dir:
        from raysfl.engine.runner import prepare

        prepared = prepare(sc, args.data_dir)
    if args.print:
        print(dumps_toml(scenario_to_dict(sc)))
    fed, tr = sc.federation, sc.train
    print(
        f"ok: {sc.name}: {sc.algorithm.name} on {sc.data.dataset} ({sc.data.partition}), model "
        f"{sc.model.name}/{sc.model.split or 'default'}, K={fed.num_clients}, C={fed.active_clients}, "
        f"E={tr.local_iterations}, B={tr.batch_size}, T={tr.global_iterations}, seed={sc.seed}"
    )
    if prepared is not None:
        print(_prepared_line(prepared))
    return 0


def _prepared_line(prepared: Any) -> str:
    """What ``validate --data`` found: the data's source and sizes, the partition's spread, the model."""
    import numpy as np

    ds, setup, prof = prepared.dataset, prepared.setup, prepared.profile
    sizes = np.array([len(ix) for ix in setup.client_indices])
    classes = (np.asarray(setup.label_hist) > 0).sum(axis=1)
    return (
        f"data: {len(ds.train_y)} train / {len(ds.test_y)} test samples from {ds.source}; "
        f"samples per client {sizes.min()}–{sizes.max()} (median {np.median(sizes):g}), "
        f"classes per client {classes.min()}–{classes.max()}; model {prof.name}/{prof.split}: "
        f"{prof.full_params:,} parameters, activations {prof.activation_bytes:,} B per sample"
    )


def _dataset_shape(dataset: str) -> tuple[int, int, int]:
    from raysfl.data.registry import DATASETS

    if dataset not in DATASETS:
        raise UsageError(f"--dataset: unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)}")
    meta = DATASETS[dataset]
    return meta.channels, meta.image_size, meta.num_classes


def cmd_describe_model(args: argparse.Namespace) -> int:
    """Print a split model's parameters, FLOPs per sample and activation size."""
    from raysfl.config import build
    from raysfl.models.config import ModelConfig
    from raysfl.models.flops import describe_model, profile_split_model
    from raysfl.models.zoo import MODELS, build_split_model, validate_model_config

    if args.name not in MODELS:
        raise UsageError(f"unknown model {args.name!r}; choose one of {', '.join(MODELS)}")
    entry = MODELS[args.name]
    dataset = args.dataset or entry.default_dataset
    channels, size, classes = _dataset_shape(dataset)
    if args.crop and not 1 <= args.crop <= size:
        raise UsageError(
            f"--crop: {args.crop} is not a crop of the {size}×{size} images of {dataset}; give 1 to {size} "
            "(0: the whole image)"
        )
    if args.crop:
        size = args.crop
    elif not args.dataset and entry.inputs[0][1] < size:  # the source experiment crops (CSE-FSL: 24×24)
        size = entry.inputs[0][1]
    cfg = build(ModelConfig, {"name": args.name, "split": args.split or "", "aux": args.aux or ""}, "model")
    problems = validate_model_config(cfg, channels, size, classes)
    if problems:
        raise ConfigError(problems)
    model = build_split_model(cfg, channels, size, classes, seed=0)
    print(f"{args.name} on {dataset} input {channels}×{size}×{size}, {classes} classes")
    print(describe_model(model, profile_split_model(model)))
    return 0


def cmd_describe_method(args: argparse.Namespace) -> int:
    """Each named method with its source and every option (``raysfl list algorithms NAME...``)."""
    _list_named_methods(args.names, "describe method")
    return 0


def cmd_describe_devices(args: argparse.Namespace) -> int:
    """Draw and print the scenario's device table and its summary."""
    from raysfl.system.profiles import describe_devices

    sc, table = _load_with_devices(args.scenario, args.overrides)
    print(f"devices of {sc.name} (seed {sc.seed}, {len(table)} clients)")
    print(describe_devices(table))
    return 0


def cmd_data_check(args: argparse.Namespace) -> int:
    """Locate, load and verify a dataset; print where it was found and its sizes."""
    from raysfl.config import build
    from raysfl.data import load_dataset
    from raysfl.data.config import DataConfig

    cfg = build(DataConfig, {"dataset": args.name, "data_dir": args.data_dir or ""}, "data")
    ds = load_dataset(cfg)
    print(
        f"ok: {ds.name}: {len(ds.train_y)} train / {len(ds.test_y)} test samples, "
        f"{ds.num_classes} classes, from {ds.source}"
    )
    if ds.release is not None:
        verdict = "" if ds.release else "not "
        doubt = "" if ds.release else ": another dataset, or a modified copy?"
        print(f"content: {verdict}the official {ds.title} release (images and labels compared){doubt}")
    return 0


def expand_scenarios(items: Sequence[str]) -> list[Path]:
    """Scenario files from paths, directories (every ``*.toml`` below, sorted) and glob patterns."""
    found: list[Path] = []
    for item in items:
        path = shipped(item)
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*.toml") if not p.name.endswith(SWEEP_SUFFIX))
            if not inside:
                raise UsageError(f"scenario directory {item!r} holds no scenario (*.toml, sweep files aside)")
            found += inside
        elif path.is_file():
            found.append(path)
        elif path.exists():
            raise UsageError(
                f"scenario {item!r} is not a regular file (a .toml file, a directory, or a glob)"
            )
        elif any(ch in item for ch in "*?["):
            hits = sorted(glob.glob(item, recursive=True)) or sorted(
                glob.glob(str(SCENARIO_ROOT / item), recursive=True)
            )
            matches = [Path(m) for m in hits]
            if not matches:
                raise UsageError(f"no scenario matches {item!r}")
            found += [m for m in matches if m.suffix == ".toml"]
        else:
            raise UsageError(f"scenario {item!r} not found (a .toml file, a directory of them, or a glob)")
    return found


def _is_override(arg: str) -> bool:
    """Whether a ``run`` argument is a ``key=value`` override, not a scenario (whose name may hold a '=')."""
    return "=" in arg and not Path(arg).exists()


def cmd_run(args: argparse.Namespace) -> int:
    """Run one scenario, or a set (directory / glob), on Ray and write each run's outputs."""
    import os

    from raysfl.engine.interrupts import stop_on_sigterm
    from raysfl.engine.runner import check_out_dir, default_out_dir, run

    overrides = [a for a in args.targets if _is_override(a)]
    paths = expand_scenarios([a for a in args.targets if not _is_override(a)])
    address = args.address or os.environ.get("RAY_ADDRESS") or None
    backend = _run_backend(args)
    if backend == "local" and args.address:
        raise UsageError(
            f"run: --address {args.address} names a Ray cluster; --backend local runs without Ray"
        )
    if args.resume and args.overwrite:
        raise UsageError("run: --resume continues a run and --overwrite starts it over; give one of them")
    if args.resume and args.out and Path(args.out).resolve() != Path(args.resume).resolve():
        raise UsageError(
            f"run: --resume {args.resume} continues that run in its own directory; --out {args.out} names "
            "another (leave --out out)"
        )
    if args.resume:
        run_dir = Path(args.resume)
        scenarios = [_resume_scenario(run_dir, paths, overrides)]
        paths = paths or [run_dir]  # a problem found while running names the run directory
    elif not paths:
        raise UsageError("run: name a scenario (file, directory or glob), or --resume RUN_DIR")
    else:
        scenarios = [_load(str(p), overrides) for p in paths]  # validate the whole set before running any
    outs: list[Path | None]
    if args.resume:
        outs = [Path(args.resume)]
    elif len(scenarios) == 1:
        outs = [Path(args.out) if args.out else None]
    else:
        _refuse_duplicate_names(scenarios, paths)
        outs = [_child_dir(Path(args.out), sc.name) if args.out else default_out_dir(sc) for sc in scenarios]
    if backend == "local":  # the server runs here: refuse a device this process lacks before any run
        from raysfl.engine.hosts import pick_device

        for sc, path in zip(scenarios, paths, strict=True):
            try:
                pick_device(sc.engine.server_device)
            except ConfigError as err:
                raise ConfigError(err.problems, source=str(path)) from None
    for out in outs:  # refuse a used or unwritable --out before running any scenario of the set
        if out is not None:
            check_out_dir(out, resume=bool(args.resume), overwrite=args.overwrite)
    stop_on_sigterm()  # a scheduler's stop ends the run as Ctrl-C does (again after ray.init)
    for sc, out, path in zip(scenarios, outs, paths, strict=True):
        try:
            summary = run(
                sc,
                out,
                backend=backend,
                address=address,
                data_dir=args.data_dir,
                resume=bool(args.resume),
                overwrite=args.overwrite,
            )
        except ConfigError as err:  # found while running (the server's device): name the scenario
            if err.source:
                raise
            raise ConfigError(err.problems, source=str(path)) from None
        _print_done(sc.name, summary)
        if summary["interrupted"]:
            return 130
    return 0


def _refuse_duplicate_names(scenarios: Sequence, paths: Sequence[Path]) -> None:
    """A set whose scenarios share a name would write them into one folder: refuse it, naming the files."""
    files: dict[str, list[str]] = {}
    for sc, path in zip(scenarios, paths, strict=True):
        files.setdefault(sc.name, []).append(str(path))
    dups = [f"{name!r} ({', '.join(where)})" for name, where in files.items() if len(where) > 1]
    if dups:
        raise UsageError(
            "run: scenarios of the set share a name, and each run's folder is named after its scenario: "
            + "; ".join(dups)
            + ". Give each file its own `name = ...`, or run them one at a time with their own --out."
        )


def _child_dir(root: Path, name: str) -> Path:
    """``root/name``, refused unless it is a direct child of ``root`` (names are validated; this holds)."""
    child = root / name
    if name in ("", ".", "..") or child.resolve().parent != root.resolve():
        raise UsageError(f"name: {name!r} would put the run outside --out {root}; use a plain folder name")
    return child


def _run_backend(args: argparse.Namespace) -> str:
    """``--backend``; else, for ``--resume`` without ``--address``, the run's own backend; else Ray.

    A run made with ``--backend local`` resumes locally unless told otherwise (it had started Ray before);
    ``$RAY_ADDRESS``, which may be set for every command, does not override that, only ``--address`` does.
    The backend is read from ``config.toml``'s ``[run]``; a run folder without a readable one resumes on Ray.
    """
    from raysfl.run_files import RunDirError, printable, read_config

    if args.backend:
        return str(args.backend)
    if not args.resume or args.address:
        return "ray"
    try:
        recorded = read_config(Path(args.resume)).get("run", {}).get("backend")
    except (RunDirError, AttributeError):
        return "ray"
    if recorded != "local":
        return "ray"
    note = f"raysfl: resuming {args.resume} on the local backend it was made with (--backend ray to change)"
    print(printable(note), file=sys.stderr)
    return "local"


def _resume_scenario(run_dir: Path, paths: Sequence[Path], overrides: Sequence[str]):  # noqa: ANN202
    """The scenario to resume ``run_dir`` with: the given file, else the one stored with the checkpoints."""
    from raysfl.engine.checkpoint import SCENARIO_FILE, require_checkpoint_dir
    from raysfl.run_files import printable
    from raysfl.scenario import scenario_from_dict

    if len(paths) > 1:
        raise UsageError("run --resume continues one run: give at most one scenario file")
    if paths:
        return _load(str(paths[0]), overrides)
    stored = require_checkpoint_dir(run_dir) / SCENARIO_FILE
    if not stored.is_file():
        raise UsageError(
            f"run --resume {run_dir}: {stored}, the scenario its checkpoints were taken with, is missing; "
            f"give that scenario: `raysfl run SCENARIO --resume {run_dir}`"
        )
    doc = read_toml(stored)
    algorithm = doc.get("algorithm")
    method = str(algorithm.get("name", "")) if isinstance(algorithm, dict) else ""
    if ":" in method:  # a method outside raysfl: its module is code, run by importing it
        print(
            printable(
                f"raysfl: {stored} names the method {method}: resuming imports the module "
                f"{method.partition(':')[0]} (from the working directory or PYTHONPATH)"
            ),
            file=sys.stderr,
        )
    try:
        sc = scenario_from_dict(doc, overrides)
    except ConfigError as err:
        raise ConfigError(err.problems, source=str(stored)) from None
    _draw_devices(sc, str(stored))
    return sc


def _print_done(name: str, summary: dict) -> None:
    acc, best = summary["final_accuracy"], summary["best_accuracy"]
    if acc is None:
        print(f"done: {name} — no evaluation finished ({summary['stop_reason']})")
        return
    print(
        f"done: {name} — final accuracy {acc:.4f}, best {best:.4f}, "
        f"{summary['global_iterations']} global iterations, emulated {summary['emulated_s']:.1f} s, "
        f"wall {summary['wall_s']:.1f} s ({summary['stop_reason']}); outputs in {summary['out_dir']}"
    )


def _check_target(target: float | None) -> None:
    """``--target`` of ``report`` and ``compare``: an accuracy in (0, 1], or not given."""
    if target is not None and not 0.0 < target <= 1.0:
        raise UsageError(f"--target: {target} must be an accuracy in (0, 1], e.g. 0.6 for 60 %")


def cmd_compare(args: argparse.Namespace) -> int:
    """Print a markdown table comparing finished runs."""
    from raysfl.compare import RunDirError, compare_table, load_run
    from raysfl.report.runs import finished_run_dirs
    from raysfl.run_files import printable

    dirs: list[Path] = []
    for item in args.runs:
        p = Path(item)
        if (p / "summary.json").is_file():
            dirs.append(p)
        elif p.is_dir():
            # the runs at any depth below, a sweep's trials in its file's order, as `raysfl report` finds them
            found, left_out = finished_run_dirs(p, interrupted_counts=True)
            for d, why in left_out:
                print(printable(f"compare: left out {d}: {why}"), file=sys.stderr)
            if not found:
                raise UsageError(
                    f"{item}: not a finished run directory (no summary.json), nor a folder with finished "
                    "runs at any depth"
                )
            dirs += [d for d, _ in found]
        else:
            raise UsageError(f"{item}: not a run directory")
    seen: set[Path] = set()
    unique: list[Path] = []
    for d in dirs:
        if d.resolve() in seen:
            print(printable(f"compare: {d} is given twice: compared once"), file=sys.stderr)
            continue
        seen.add(d.resolve())
        unique.append(d)
    dirs = unique
    _check_target(args.target)
    try:
        records = [load_run(d) for d in dirs]
    except RunDirError as err:
        raise UsageError(str(err)) from None
    print(printable(compare_table(records, args.target)))
    for r in records:
        if r.interrupted:
            print(f"compare: {r.path} was interrupted before its budget; resume it with "
                  f"`raysfl run --resume {r.path}`", file=sys.stderr)  # fmt: skip
    return 0


def seed_list(text: str) -> list[int]:
    """``--seeds 1,2,3``: the seeds, in order (``"1, 2,3"`` is ``[1, 2, 3]``)."""
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integer seeds") from None


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run a sweep file's trials through Ray Tune (``--dry-run``: list them with their resources)."""
    import os
    from datetime import datetime

    from raysfl.engine.cluster import ensure_ray
    from raysfl.sweep.execute import (
        SweepCommand,
        dry_run_text,
        local_resources,
        print_interrupted,
        print_outcome,
        resume_plan,
        run_sweep,
    )
    from raysfl.sweep.spec import load_sweep

    path = shipped(args.sweep)
    if not path.is_file():
        raise UsageError(f"sweep file {args.sweep} not found")
    sweep = load_sweep(path, seeds=args.seeds)
    if args.max_concurrent is not None and args.max_concurrent < 1:
        raise UsageError(f"--max-concurrent: {args.max_concurrent} must be >= 1")
    if args.resume and not args.out:
        raise UsageError("--resume: name the sweep's output directory with --out")
    if args.trial_cpus is not None and not 0 < args.trial_cpus < float("inf"):
        raise UsageError(
            f"--trial-cpus: {args.trial_cpus} must be a number > 0 (the CPUs one trial reserves)"
        )
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else Path("runs") / f"{sweep.name}-sweep-{stamp}"
    address = args.address or os.environ.get("RAY_ADDRESS") or None
    if args.dry_run:
        nodes = None  # this machine
        if address:
            import ray

            from raysfl.engine.cluster import alive_nodes

            ensure_ray(address)
            cluster = {k: float(v) for k, v in ray.cluster_resources().items()}
            nodes = alive_nodes()
        else:
            cluster = local_resources()
        to_run = resume_plan(sweep, out.resolve()) if args.resume else None
        print(dry_run_text(sweep, cluster, out, args.max_concurrent, args.trial_cpus, nodes, to_run))
        return 0
    how = SweepCommand(args.sweep, args.trial_cpus, address, args.data_dir, args.max_concurrent, args.seeds)
    try:
        result = run_sweep(
            sweep,
            out,
            address=address,
            max_concurrent=args.max_concurrent,
            resume=args.resume,
            data_dir=args.data_dir,
            trial_cpus=args.trial_cpus,
        )
    except KeyboardInterrupt:  # a second Ctrl-C: Tune stops at once, without returning its results
        return print_interrupted(out, how)
    return print_outcome(result, how)


def cmd_report(args: argparse.Namespace) -> int:
    """Group finished runs by everything but the seed; write report.md (mean ± std) and PNG figures."""
    from raysfl.report.markdown import write_report
    from raysfl.run_files import printable

    _check_target(args.target)
    if args.last is not None and args.last < 1:
        raise UsageError(f"--last: {args.last} must be >= 1 (evaluations at the end of each run)")
    out = Path(args.out) if args.out else Path(args.runs[0]) / "report"
    # shell-quoted, so the recorded command reruns as it stands ("A vs B" pairings hold spaces)
    command = "raysfl report " + shlex.join(sys.argv[2:]) if sys.argv[1:2] == ["report"] else ""
    try:
        report = write_report(
            args.runs,
            out,
            target=args.target,
            x=args.x,
            command=command,
            last=args.last or 0,
            paired=args.paired or (),
            metric=args.metric,
            labels=args.label or (),
        )
    except (FileNotFoundError, ValueError) as err:
        raise UsageError(f"report: {err}") from None
    for path, reason in report.skipped:
        print(printable(f"report: skipped {path}: {reason}"), file=sys.stderr)
    for warning in report.warnings:
        print(printable(f"report: warning: {warning}"), file=sys.stderr)
    n_runs = sum(len(g.runs) for g in report.groups)
    print(
        f"report: {n_runs} runs in {len(report.groups)} groups; wrote {report.path} and "
        f"{len(report.figures)} figures"
    )
    return 0


def cmd_pool(args: argparse.Namespace) -> int:
    """Read several reports' runs.csv as one set of runs; print (or write) mean ± std and paired tables."""
    from raysfl.report.pool import pool_tables, pooled_markdown
    from raysfl.run_files import printable
    from raysfl.safe_write import replace_text

    command = "raysfl pool " + shlex.join(sys.argv[2:]) if sys.argv[1:2] == ["pool"] else ""
    try:
        pool = pool_tables(args.tables, args.column or ())
        text = pooled_markdown(pool, args.paired or (), command)
    except (FileNotFoundError, ValueError) as err:
        raise UsageError(f"pool: {err}") from None
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        replace_text(Path(args.out), text)
        print(printable(f"pool: {len(pool.runs)} runs from {len(pool.sources)} files; wrote {args.out}"))
    else:
        print(printable(text), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``raysfl`` command."""
    parser = _Parser(
        prog="raysfl",
        description="Ray-based simulator for asynchronous split federated learning with straggling devices.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="list scenarios, datasets, models, algorithms, device profiles")
    p.add_argument(
        "what",
        nargs="?",
        default="all",
        choices=("all", "scenarios", "datasets", "models", "algorithms", "devices"),
    )
    p.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="with algorithms: show these methods with their options (a built-in or entry-point name, "
        "or an import path package.module:SPEC)",
    )
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("validate", help="check a scenario file (with key=value overrides)")
    p.add_argument("scenario")
    p.add_argument("overrides", nargs="*", default=[], metavar="key=value")  # default: not "required"
    p.add_argument("--print", action="store_true", help="print the resolved scenario as TOML")
    p.add_argument(
        "--data",
        action="store_true",
        help="also load the dataset, partition it over the clients and build the model, as a run does "
        "(finds what depends on the data: a partition that cannot give every client its minimum, a "
        "model that does not fit the images)",
    )
    p.add_argument("--data-dir", help="look for the dataset here first (implies --data)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("describe", help="describe a model, a scenario's devices or a method")
    dsub = p.add_subparsers(dest="what", required=True, metavar="WHAT")
    m = dsub.add_parser("model", help="parameters, FLOPs and activation size of a split model")
    m.add_argument("name")
    m.add_argument("--split", help="split point (default: the model's default)")
    m.add_argument("--aux", help="auxiliary head")
    m.add_argument("--dataset", help="input shape taken from this dataset (default: the model's own)")
    m.add_argument("--crop", type=int, default=0, help="input crop size (e.g. 24 for CSE-FSL CIFAR-10)")
    m.set_defaults(func=cmd_describe_model)
    d = dsub.add_parser("devices", help="the device table a scenario draws")
    d.add_argument("scenario")
    d.add_argument("overrides", nargs="*", default=[], metavar="key=value")
    d.set_defaults(func=cmd_describe_devices)
    me = dsub.add_parser("method", help="a method's source and options (= list algorithms NAME)")
    me.add_argument("names", nargs="+", metavar="NAME", help="a built-in or entry-point name, or module:SPEC")
    me.set_defaults(func=cmd_describe_method)

    p = sub.add_parser("run", help="run scenarios and write metrics, events, TensorBoard and a summary")
    p.add_argument(
        "targets",
        nargs="*",
        metavar="SCENARIO|key=value",
        help="scenario files, directories or globs, and key=value overrides applied to each",
    )
    p.add_argument("--out", help="run directory (several scenarios: a root with one folder per scenario)")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the outputs of a run already in the run directory (default: refuse it)",
    )
    p.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue RUN_DIR from its newest checkpoint (engine.checkpoint_every > 0 writes them)",
    )
    p.add_argument(
        "--address", help="join this Ray cluster ('auto' or host:port; default $RAY_ADDRESS or local)"
    )
    p.add_argument("--data-dir", help="look for the dataset here first")
    p.add_argument(
        "--backend",
        choices=("ray", "local"),
        default=None,
        help="ray (default; --resume: the run's own) or local: everything in this process, for debugging",
    )
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("sweep", help="run a sweep file (methods × settings × seeds) through Ray Tune")
    p.add_argument("sweep", metavar="SWEEP.toml", help="sweep file: base scenario, [set], [grid], [link.*]")
    p.add_argument("--out", help="output directory (default runs/<sweep>-sweep-<timestamp>)")
    p.add_argument(
        "--address", help="join this Ray cluster ('auto' or host:port; default $RAY_ADDRESS or local)"
    )
    p.add_argument("--max-concurrent", type=int, help="at most this many trials at once (default: what fits)")
    p.add_argument(
        "--trial-cpus",
        type=float,
        help="CPUs each trial reserves (default: its actors' threads); less packs more trials at once, for "
        "trials whose actors mostly wait (GAS: --trial-cpus 1 runs 2 at once on 2 cores); numbers unchanged",
    )
    p.add_argument(
        "--seeds",
        type=seed_list,
        metavar="S1,S2,...",
        help="run the trials with these seeds instead of the file's [grid] seed axis (more seeds of a sweep "
        "without a copy of its file; repeat it with --resume)",
    )
    p.add_argument("--resume", action="store_true", help="continue the sweep in --out where it stopped")
    p.add_argument("--dry-run", action="store_true", help="list the trials and their resources; run nothing")
    p.add_argument("--data-dir", help="look for the dataset here first")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("report", help="mean ± std over seeds of finished runs, with figures (report.md)")
    p.add_argument("runs", nargs="+", metavar="DIR", help="run directories, sweep outputs, or folders")
    p.add_argument("--out", help="report directory (default: DIR/report for the first DIR)")
    p.add_argument("--target", type=float, help="accuracy (0-1) for the time-to-target column")
    p.add_argument(
        "--x",
        choices=("emulated", "iteration", "bytes", "wall"),
        default="emulated",
        help="x axis of the time-to-target column and the first figure (default emulated)",
    )
    p.add_argument(
        "--last",
        type=int,
        metavar="K",
        help="add a column: each run's mean accuracy over its last K evaluations, mean ± std over seeds",
    )
    p.add_argument(
        "--paired",
        action="append",
        metavar="METHOD",
        help="add every method's per-seed differences to METHOD (a label of the method column, or an "
        "algorithm's name when its runs have one label), or with 'OTHER vs METHOD' only OTHER's; repeatable",
    )
    p.add_argument(
        "--metric",
        default="accuracy",
        metavar="COLUMN",
        help="the evaluation column to report: accuracy (default) or another *accuracy column (aux_accuracy)",
    )
    p.add_argument(
        "--label",
        action="append",
        metavar="NAME=DIR",
        help="name the method of the runs at or below DIR (a glob pattern is expanded) NAME, as a sweep's "
        "link labels do; for runs made outside their sweep's folder; repeatable",
    )
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "pool",
        help="mean ± std and paired differences over several reports' runs.csv (more seeds, one reading)",
        description="Read the runs.csv files that several `raysfl report` calls wrote (a sweep and its "
        "reruns with other seeds, say) as one set of runs, matched by setting and method label; print mean "
        "± std per method and, with --paired, per-seed differences with a Student's t interval, from the "
        "values at full precision.",
    )
    p.add_argument("tables", nargs="+", metavar="RUNS.csv", help="runs.csv files written by raysfl report")
    p.add_argument(
        "--column",
        action="append",
        metavar="NAME",
        help="a column to pool: final_<metric>, best_<metric>, last<K>_<metric> or <x>_to_<target> "
        "(default: every such column all files hold but best_*); repeatable",
    )
    p.add_argument(
        "--paired",
        action="append",
        metavar="METHOD",
        help="as raysfl report's --paired: every method against METHOD, or 'OTHER vs METHOD'; repeatable",
    )
    p.add_argument("--out", help="write the markdown to this file instead of printing it")
    p.set_defaults(func=cmd_pool)

    p = sub.add_parser(
        "compare",
        help="compare finished runs side by side (markdown table)",
        description="Compare finished runs side by side (markdown table). With --target, the columns add "
        "the emulated s to that accuracy; conv acc, the mean of a run's last 5 evaluations; and the first "
        "run's gains over each run as the FedASMU paper states them, relative: acc gain = conv acc of the "
        "first / conv acc of the run - 1, speed gain = 1 - its time to the target / the run's (- where "
        "either never reaches it). For mean ± std over seeds use `raysfl report`.",
    )
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories, or folders that contain them")
    p.add_argument("--target", type=float, help="accuracy (0-1) for the emulated time-to-accuracy column")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("data", help="dataset utilities")
    dsub = p.add_subparsers(dest="what", required=True, metavar="WHAT")
    c = dsub.add_parser("check", help="find, load and verify a dataset")
    c.add_argument("name")
    c.add_argument("--data-dir", help="look here first")
    c.set_defaults(func=cmd_data_check)
    return parser


def _method_errors() -> tuple[type[BaseException], ...]:
    from raysfl.engine.policy_errors import MethodError

    return (MethodError,)


def _user_errors() -> tuple[type[BaseException], ...]:
    from raysfl.data import DataError
    from raysfl.data.errors import PartitionError
    from raysfl.engine.checkpoint import CheckpointError
    from raysfl.engine.cluster import ClusterTooSmallError, ClusterUnreachableError
    from raysfl.engine.dispatch import WorkerStartError
    from raysfl.engine.runner import OutDirError, RunFailedError
    from raysfl.safe_write import LinkedOutputError
    from raysfl.sweep.execute import SweepStateError

    return (
        UsageError,
        OutDirError,
        DataError,
        PartitionError,
        ClusterUnreachableError,
        ClusterTooSmallError,
        CheckpointError,
        RunFailedError,
        SweepStateError,
        WorkerStartError,
        LinkedOutputError,
    )


def _show_warning(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001, ANN202
    """Show raysfl's own warnings as one line, ``raysfl: warning: ...``, and others as Python does."""
    if Path(filename).resolve().is_relative_to(PACKAGE_DIR):
        sys.stdout.flush()  # after what was printed before it
        print(f"raysfl: warning: {message}", file=sys.stderr if file is None else file)
    else:
        (sys.stderr if file is None else file).write(
            warnings.formatwarning(message, category, filename, lineno, line)
        )


PACKAGE_DIR = Path(__file__).resolve().parent


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``raysfl`` console script; returns the process exit status."""
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    shown_by = warnings.showwarning
    warnings.showwarning = _show_warning  # for this command only (tests call main in one process)
    try:
        data_dir = getattr(args, "data_dir", None)
        if data_dir and not Path(data_dir).is_dir():  # it would be passed over for the usual places
            raise UsageError(f"--data-dir: {data_dir} is not a directory")
        return func(args)
    except ConfigError as err:
        print(f"raysfl: {err.report()}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # before _user_errors(): a ^C inside `import torch` leaves it half-imported
        print("raysfl: interrupted", file=sys.stderr)
        return 130
    except _user_errors() as err:
        print(f"raysfl: {err}", file=sys.stderr)
        return EXIT_USAGE
    except _method_errors() as err:  # a method's bug, said in its terms: the engine's traceback adds nothing
        print(f"raysfl: the method's logic: {err}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return 0
    finally:
        warnings.showwarning = shown_by
        _stop_embedded_ray()


def _stop_embedded_ray() -> None:
    """Stop the local Ray a command started, leaving no process of it behind (no-op if none)."""
    cluster = sys.modules.get("raysfl.engine.cluster")
    if cluster is not None:
        cluster.shutdown_ray()


if __name__ == "__main__":
    sys.exit(main())
