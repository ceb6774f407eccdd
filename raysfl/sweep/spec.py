"""Sweep files: a base scenario, settings applied to every trial, and the axes whose product is the trials.

A sweep file is TOML::

    base = "../gas/table1/fmnist_s2_gas.toml"   # scenario path, relative to the sweep file
    name = "table1_fmnist"                       # optional; default: the sweep file's stem
    description = "GAS Table 1, FMNIST"          # optional

    [set]                                        # applied to every trial (dotted keys, TOML values)
    "train.global_iterations" = 200

    [grid]                                       # independent axes: their cartesian product
    seed = [1, 2, 3]

    [link.method]                                # linked axes: one column of values per trial, zipped
    label = ["gas", "fedavg"]                    # optional: the names this axis gives trials
    "algorithm.name" = ["gas", "fedavg"]
    "algorithm.params" = [{ q_s = 10, q_c = 10 }, {}]
    "reference.accuracy" = [90.66, 84.61]

Each ``[link.NAME]`` table is one axis whose entries change together (a method with its parameters, a
dataset with its model); all its lists have the same length. Axes combine in the order of the file (the
``[grid]`` axes in their order, and the ``[link.*]`` tables in theirs, before or after ``[grid]`` as the
first ``[link.*]`` table stands: TOML gathers them into one ``link`` table, so a ``[link.*]`` table written
after ``[grid]`` still comes before it when another one stands before it); the first axis is the
outermost loop and the first part of a trial's name. A dotted key
sets that value in the scenario, replacing it whole (a table value replaces the whole table, so
``"algorithm.params" = {}`` clears the base's parameters).

Trial names are built from the axis values (strings as they are, other values as ``<last key part><value>``,
a link axis by its ``label`` or its first key's value) joined by ``_``, e.g. ``gas_seed1``; every trial's
scenario ``name`` is its trial name and its outputs go to ``OUT/<trial name>/``.

Everything here is pure: :func:`load_sweep` reads and checks the file and builds every trial's scenario,
reporting *all* problems at once in one :class:`~raysfl.config.ConfigError` before anything runs.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raysfl.config import ConfigError, read_toml, short_repr
from raysfl.scenario import Scenario, resolve_trace_file, scenario_from_dict

TOP_LEVEL_KEYS = ("base", "name", "description", "set", "grid", "link")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
RESERVED_NAME = "report"  # `raysfl report OUT` writes into OUT/report/ by default
_MAX_NAME = 120


@dataclass(frozen=True)
class Axis:
    """One axis of the sweep: ``keys`` (dotted scenario keys) take ``values[i]`` together, for each i."""

    name: str
    keys: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]  # one tuple per point of the axis, aligned with ``keys``
    labels: tuple[str, ...]  # the name fragment of each point
    given: tuple[str, ...] = ()  # a link axis's own ``label`` list, as written (empty: none given)
    section: str = "grid"  # the sweep file's table that declares it: grid or link


@dataclass(frozen=True)
class Trial:
    """One run of the sweep: its name and the values it sets on top of the base and ``[set]``."""

    name: str
    assignments: tuple[tuple[str, Any], ...]  # (dotted key, value) from the axes, in axis order
    scenario: Scenario = field(compare=False)
    labels: tuple[tuple[str, str], ...] = ()  # (link axis, its given label) for axes that give labels


@dataclass(frozen=True)
class Sweep:
    """A validated sweep: where it came from, its axes and every trial, scenarios built and checked."""

    path: Path
    name: str
    description: str
    base: Path
    settings: dict[str, Any]
    axes: tuple[Axis, ...]
    trials: tuple[Trial, ...]


def set_dotted(doc: dict[str, Any], key: str, value: Any) -> None:
    """Set ``doc[a][b][c] = value`` for ``key = "a.b.c"``, creating tables on the way; replaces whole values.

    Raises:
        ValueError: a part on the way is not a table.

    Example:
        >>> d = {"train": {"lr": 0.1}}
        >>> set_dotted(d, "train.lr", 0.01); d
        {'train': {'lr': 0.01}}
    """
    parts = key.split(".")
    node = doc
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ValueError(f"{part!r} is not a table")
        node = child
    node[parts[-1]] = copy.deepcopy(value)


def _fragment(key: str, value: Any) -> str:
    """The part of a trial name one axis value gives: strings as they are, else ``<last key part><value>``."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool):
        text = f"{key.rsplit('.', 1)[-1]}{'1' if value else '0'}"
    elif isinstance(value, (int, float)):
        text = (
            f"{key.rsplit('.', 1)[-1]}{value:g}"
            if isinstance(value, float)
            else f"{key.rsplit('.', 1)[-1]}{value}"
        )
    else:
        text = key.rsplit(".", 1)[-1]
    return _SAFE.sub("-", text).strip("-.") or "x"


def _check_key(key: Any, where: str, problems: list[str]) -> bool:
    if not isinstance(key, str) or not key or any(not p for p in key.split(".")):
        problems.append(f"{where}: {key!r} is not a dotted scenario key (e.g. 'train.lr')")
        return False
    return True


def _grid_axes(grid: Any, problems: list[str]) -> list[Axis]:
    if not isinstance(grid, Mapping):
        problems.append("grid: must be a table of `dotted.key = [values]`")
        return []
    axes = []
    for key, values in grid.items():
        where = f"grid.{key!r}" if "." in str(key) else f"grid.{key}"
        if isinstance(values, Mapping):
            problems.append(
                f'{where}: is a table; quote dotted keys ("{key}.x" = [...]) or put linked keys '
                f"under [link.{key}]"
            )
            continue
        if not _check_key(key, where, problems):
            continue
        if not isinstance(values, list):
            problems.append(f"{where}: must be a list of values, got {values!r}")
            continue
        if not values:
            problems.append(f"{where}: empty axis; give at least one value")
            continue
        axes.append(Axis(key, (key,), tuple((v,) for v in values), tuple(_fragment(key, v) for v in values)))
    return axes


def _link_axes(links: Any, problems: list[str]) -> list[Axis]:
    if not isinstance(links, Mapping):
        problems.append("link: must hold tables, [link.NAME], each of `dotted.key = [values]` of one length")
        return []
    axes = []
    for name, table in links.items():
        where = f"link.{name}"
        if not isinstance(table, Mapping):
            problems.append(f"{where}: must be a table of `dotted.key = [values]` lists of one length")
            continue
        labels = table.get("label")
        columns = {k: v for k, v in table.items() if k != "label"}
        ok = True
        for key, values in columns.items():
            ok &= _check_key(key, f"{where}.{key}", problems)
            if not isinstance(values, list):
                problems.append(f"{where}.{key}: must be a list of values, got {values!r}")
                ok = False
        if not columns:
            problems.append(f"{where}: no keys; give at least one `dotted.key = [values]`")
            continue
        if not ok:
            continue
        lengths = {k: len(v) for k, v in columns.items()}
        if labels is not None:
            if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
                problems.append(f"{where}.label: must be a list of strings")
                continue
            lengths["label"] = len(labels)
        if len(set(lengths.values())) > 1:
            listed = ", ".join(f"{k} has {n}" for k, n in lengths.items())
            problems.append(f"{where}: linked axes must have the same length; {listed}")
            continue
        n = next(iter(lengths.values()))
        if n == 0:
            problems.append(f"{where}: empty axis; give at least one value")
            continue
        keys = tuple(columns)
        points = tuple(tuple(columns[k][i] for k in keys) for i in range(n))
        first = keys[0]
        names = (
            tuple(_SAFE.sub("-", x).strip("-.") or "x" for x in labels)
            if labels is not None
            else tuple(_fragment(first, p[0]) for p in points)
        )
        given = tuple(labels) if labels is not None else ()
        axes.append(Axis(name, keys, points, names, given, section="link"))
    return axes


def given_labels(axes: list[Axis], combo: tuple[int, ...]) -> tuple[tuple[str, str], ...]:
    """(axis name, label) of a trial's point on every link axis that gives a ``label`` list."""
    return tuple((axis.name, axis.given[i]) for axis, i in zip(axes, combo, strict=True) if axis.given)


def _trial_name(labels: list[str]) -> str:
    name = "_".join(labels) if labels else "trial"
    return name[:_MAX_NAME]


def load_sweep(path: str | Path, seeds: Sequence[int] | None = None) -> Sweep:
    """Read, check and expand a sweep file; one :class:`ConfigError` lists every problem it finds.

    Problems found: a scenario given as a sweep file, unknown top-level keys, a missing or invalid base
    scenario, empty axes, linked axes of different lengths, an axis key set twice, a point listed twice,
    duplicate trial names, and every trial whose scenario does not validate (each problem prefixed with
    the trial's name). ``seeds`` (``raysfl sweep --seeds``) replaces the file's ``[grid]`` seed axis, or adds
    one (:func:`override_seeds`).
    """
    p = Path(path)
    raw = read_toml(p, kind="sweep file")
    problems: list[str] = []
    if seeds is not None:
        override_seeds(raw, seeds, problems)
    if "base" not in raw and {"data", "model", "train", "algorithm"} & set(raw):
        problems.append(
            f"{p} is a scenario, not a sweep file: run it with `raysfl run {p}`, or sweep it from a sweep "
            f'file whose `base = "{p.name}"`'
        )
    for key in raw:
        if key not in TOP_LEVEL_KEYS:
            problems.append(f"{key}: unknown key of a sweep file; allowed: {', '.join(TOP_LEVEL_KEYS)}")
    base_doc: dict[str, Any] | None = None
    base_path = Path()
    base = raw.get("base")
    if base is None or base == "":
        problems.append("base: required, the path of the base scenario (relative to the sweep file)")
    elif not isinstance(base, str):
        problems.append(
            f"base: {short_repr(base)} is not a path; give the base scenario's path as a string "
            '(relative to the sweep file), e.g. base = "scenario.toml"'
        )
    else:
        base_path = (p.parent / base).resolve()
        if not base_path.is_file():
            problems.append(f"base: scenario {base!r} not found (looked at {base_path})")
        else:
            try:
                base_doc = read_toml(base_path)
                resolve_trace_file(base_doc, base_path.parent)  # as the scenario loader: from its folder
            except ConfigError as err:
                problems += [f"base: {m}" for m in err.problems]
    settings = raw.get("set", {})
    if not isinstance(settings, Mapping):
        problems.append('set: must be a table of `"dotted.key" = value`')
        settings = {}
    for key in settings:
        _check_key(key, f"set.{key}", problems)
    grid_axes = _grid_axes(raw.get("grid", {}), problems)
    link_axes = _link_axes(raw.get("link", {}), problems)
    keys = list(raw)
    link_first = "link" in raw and "grid" in raw and keys.index("link") < keys.index("grid")
    axes = link_axes + grid_axes if link_first else grid_axes + link_axes
    seen: dict[str, str] = {}
    for axis in axes:
        for key in axis.keys:
            if key in seen:
                problems.append(f"{axis.name}: key {key!r} is already swept by axis {seen[key]}")
            for inner in (k for k in seen if k.startswith(key + ".")):  # applied later, the table replaces it
                problems.append(
                    f"{axis.name}: key {key!r} replaces the whole table, so the values axis {seen[inner]} "
                    f"gives {inner!r} are lost in every trial; sweep {key!r} before {inner!r} (the file's "
                    "order of [grid] and [link]), or sweep the inner keys only"
                )
            seen[key] = axis.name
        problems += _repeated_points(axis)
    for key in settings:
        swept = [k for k in seen if key == k or key.startswith(k + ".")]
        if swept:
            problems.append(
                f"set.{key}: also swept ({swept[0]!r} by axis {seen[swept[0]]}), which replaces it in every "
                "trial; remove it from [set] or from the axis"
            )
    name = raw.get("name", p.name.removesuffix(".toml").removesuffix(".sweep"))  # x.sweep.toml: x
    description = raw.get("description", "")
    if not isinstance(name, str) or not name or _SAFE.search(name):
        problems.append(f"name: {name!r} must be a non-empty name of letters, digits, '.', '_' or '-'")
    if problems or base_doc is None:
        raise ConfigError(problems or ["base: could not be read"], source=str(p), kind="sweep file")
    trials = _expand(base_doc, base_path, dict(settings), axes, problems)
    if problems:
        raise ConfigError(problems, source=str(p), kind="sweep file")
    return Sweep(p, str(name), str(description), base_path, dict(settings), tuple(axes), tuple(trials))


def override_seeds(raw: dict[str, Any], seeds: Sequence[int], problems: list[str]) -> None:
    """``--seeds``: run the sweep file's trials with ``seeds`` instead of its own seed axis.

    More seeds of a finished sweep are the same file with another seed axis; this saves a copy of it. The
    ``[grid]`` axis ``seed`` takes the values where the file has it (the trials keep their order); otherwise
    it is added as the last ``[grid]`` axis, and a file without ``[grid]`` gets one after its ``[link.*]``
    tables (so its trial names end in ``_seedN``). A seed set in
    ``[set]`` or in a ``[link.*]`` table together with other keys cannot be replaced alone: a problem.
    """
    if not seeds:
        problems.append("--seeds: give at least one seed")
    bad = [s for s in seeds if isinstance(s, bool) or not isinstance(s, int) or s < 0]
    if bad:
        problems.append(f"--seeds: {', '.join(map(repr, bad))} not a seed; seeds are integers >= 0")
    settings = raw.get("set")
    if isinstance(settings, Mapping) and "seed" in settings:
        problems.append("--seeds: set.seed fixes every trial's seed; remove it from [set] to sweep seeds")
    links = raw.get("link")
    for name, table in links.items() if isinstance(links, Mapping) else ():
        if isinstance(table, Mapping) and "seed" in table:
            problems.append(
                f"--seeds: link.{name} sets the seed together with other keys; edit the sweep file instead"
            )
    grid = raw.setdefault("grid", {})
    if isinstance(grid, dict):
        grid["seed"] = list(seeds)


def _repeated_points(axis: Axis) -> list[str]:
    """A problem per point that ``axis`` lists twice (``seed = [1, 1]``): it would run one trial twice."""
    points = [json.dumps(point, sort_keys=True, default=str) for point in axis.values]
    repeated = sorted({i for i, point in enumerate(points) if points.index(point) != i})
    if axis.keys == (axis.name,):  # a [grid] axis, named as its problems are
        where = f"grid.{axis.name!r}" if "." in axis.name else f"grid.{axis.name}"
    else:
        where = f"link.{axis.name}"
    return [
        f"{where}: {', '.join(axis.keys)} = {', '.join(map(repr, axis.values[i]))} is listed twice; each "
        "point of an axis runs once"
        for i in repeated
    ]


def _expand(
    base_doc: dict[str, Any],
    base_path: Path,
    settings: dict[str, Any],
    axes: list[Axis],
    problems: list[str],
) -> list[Trial]:
    """Every trial of the product of ``axes``, each scenario built and validated."""
    trials: list[Trial] = []
    names: dict[str, int] = {}
    failing: dict[str, list[str]] = {}  # a problem → the trials that have it, so a shared one is said once
    indices = itertools.product(*(range(len(a.values)) for a in axes))
    for combo in indices:
        assignments = tuple(
            (key, axis.values[i][j])
            for axis, i in zip(axes, combo, strict=True)
            for j, key in enumerate(axis.keys)
        )
        name = _trial_name([axis.labels[i] for axis, i in zip(axes, combo, strict=True)])
        names[name] = names.get(name, 0) + 1
        doc = copy.deepcopy(base_doc)
        doc.setdefault("name", base_path.stem)
        bad = False
        for key, value in [*settings.items(), *assignments]:
            try:
                set_dotted(doc, key, value)
            except ValueError as err:
                problems.append(f"{name}: {key}: {err}")
                bad = True
        doc["name"] = name
        if bad:
            continue
        try:
            sc = scenario_from_dict(doc)
        except ConfigError as err:
            for message in err.problems:
                failing.setdefault(message, []).append(name)
            continue
        trials.append(Trial(name, assignments, sc, given_labels(axes, combo)))
    total = len(names) and sum(names.values())
    for message, where in failing.items():
        who = "every trial" if len(where) == total and total > 1 else "trial " + ", ".join(where)
        problems.append(f"{who}: {message}")
    for name in names:
        if name.startswith(("_", ".")) or name == RESERVED_NAME:
            problems.append(
                f"{name}: a trial's name may not start with '_' or '.' or be {RESERVED_NAME!r} (the sweep's "
                f"folder holds Ray Tune's _tune/ and a report's {RESERVED_NAME}/ beside the trials, and "
                "reports skip such folders); change the label or value that names it"
            )
    dups = sorted(n for n, c in names.items() if c > 1)
    if dups:
        joined = ", ".join(_axis_ref(axis) for axis in axes)
        problems += _name_collisions(axes) or [
            f"several trials get the same name ({', '.join(dups)}): the name parts of {joined}, joined with "
            "'_', run together; give the link axes `label` lists (or the grid values) whose parts do not"
        ]
    return trials


def _axis_ref(axis: Axis) -> str:
    """Where the sweep file declares ``axis``: ``grid.seed``, ``grid.'train.lr'`` or ``link.method``."""
    if axis.section == "grid":
        return f"grid.{axis.name!r}" if "." in axis.name else f"grid.{axis.name}"
    return f"link.{axis.name}"


def _name_collisions(axes: list[Axis]) -> list[str]:
    """For each axis that names two of its points alike, why and what to do (the trials' names repeat)."""
    problems = []
    for axis in axes:
        repeated = sorted({x for x in axis.labels if axis.labels.count(x) > 1})
        if not repeated:
            continue
        said = ", ".join(map(repr, repeated))
        if axis.given:
            for name in repeated:
                given = [g for g, cleaned in zip(axis.given, axis.labels, strict=True) if cleaned == name]
                spelled = (
                    f"{' and '.join(map(repr, given))} name trials {name!r} alike (a trial's name keeps "
                    "letters, digits and . _ -)"
                    if len(set(given)) > 1
                    else f"{given[0]!r} names two points"
                )
                problems.append(f"link.{axis.name}.label: {spelled}; give each point a label of its own")
        elif axis.section == "grid":
            problems.append(
                f"{_axis_ref(axis)}: two of its values give a trial the same name part {said} (a table or a "
                'long value is named by its key alone); sweep the keys inside the tables (grid."train.lr" = '
                "[...]), or put the values under a [link.NAME] table with a `label` list"
            )
        else:
            problems.append(
                f"link.{axis.name}: two points are named alike ({said}, from {axis.keys[0]}); give the axis "
                "a `label` list that tells them apart"
            )
    return problems
