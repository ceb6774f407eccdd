"""A scenario: the typed, validated description of one simulation run.

A scenario file is TOML; every section maps to a frozen dataclass owned by its component. Loading applies
``dotted.key=value`` overrides, builds the dataclasses, parses ``[algorithm.params]`` into the chosen
method's ``Params`` and runs the cross-section checks; every problem is reported at once in one
:class:`~raysfl.config.ConfigError`, each named by its dotted path with the allowed values.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raysfl.algorithms import AlgorithmSpec
from raysfl.algorithms.config import AlgorithmConfig, FederationConfig, TrainConfig
from raysfl.config import (
    ConfigError,
    apply_overrides,
    build,
    diagnostic_options,
    option,
    read_toml,
    to_dict,
    unused_options,
)
from raysfl.data.config import DataConfig
from raysfl.data.registry import DATASETS
from raysfl.engine.config import EngineConfig
from raysfl.methods import UnknownAlgorithmError, resolve
from raysfl.metrics.config import MetricsConfig
from raysfl.models.config import ModelConfig
from raysfl.models.zoo import validate_model_config
from raysfl.system.config import SystemConfig

NAME_MAX_CHARS = 128
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def check_name(name: str) -> str | None:
    """Why ``name`` cannot name a run directory, or ``None``.

    A scenario name becomes a folder (``OUT/<name>``, ``runs/<name>-<time>``): 1 to 128 letters, digits,
    ``.``, ``_`` or ``-``, starting with a letter, digit or ``_``; so no path separators, ``..``, hidden
    names or characters a file system or a shell would trip on.
    """
    if len(name) <= NAME_MAX_CHARS and _NAME.fullmatch(name):
        return None
    return (
        f"is not a usable run-directory name; use 1 to {NAME_MAX_CHARS} letters, digits, '.', '_' or '-', "
        "starting with a letter, digit or '_'"
    )


def name_from_stem(stem: str) -> str:
    """A valid scenario name from a file's stem (unsafe characters become ``_``), for a file without one."""
    name = _NAME_UNSAFE.sub("_", stem).lstrip(".-")[:NAME_MAX_CHARS]
    return name or "scenario"


@dataclass(frozen=True)
class Scenario:
    """Everything a run needs; the resolved copy is written beside the run's outputs."""

    name: str = option(
        "scenario", check=check_name, doc="scenario name: names the run directory (letters, digits, . _ -)"
    )
    description: str = option("", doc="one line on what this scenario reproduces")
    seed: int = option(2023, ge=0, doc="root seed of every random stream [P] GAS App. E")
    data: DataConfig = option(factory=DataConfig)
    model: ModelConfig = option(factory=ModelConfig)
    system: SystemConfig = option(factory=SystemConfig)
    federation: FederationConfig = option(factory=FederationConfig)
    train: TrainConfig = option(factory=TrainConfig)
    algorithm: AlgorithmConfig = option(factory=AlgorithmConfig)
    engine: EngineConfig = option(factory=EngineConfig)
    metrics: MetricsConfig = option(factory=MetricsConfig)
    reference: dict[str, Any] = field(default_factory=dict)  # the paper's numbers this scenario reproduces

    @functools.cached_property
    def params(self) -> Any:
        """The algorithm's parsed ``Params`` dataclass (built once, when the scenario is loaded)."""
        return build(self.algorithm_spec.params, self.algorithm.params, "algorithm.params")

    @property
    def algorithm_spec(self) -> AlgorithmSpec:
        """The spec of the scenario's algorithm: built in, or found by import path or entry point."""
        return resolve(self.algorithm.name)


def _reference_problems(reference: dict[str, Any]) -> list[str]:
    """``[reference] accuracy`` is the paper's accuracy in percent, as reports and ``compare`` print it."""
    acc = reference.get("accuracy")
    if acc is None or (isinstance(acc, (int, float)) and not isinstance(acc, bool) and 1 < acc <= 100):
        return []
    hint = (
        f"; {acc!r} reads as a fraction, so write {100 * acc:g}"
        if isinstance(acc, float) and 0 < acc <= 1
        else ""
    )
    return [f"reference.accuracy: {acc!r} is not an accuracy in percent (a number in (1, 100]){hint}"]


def _cross_checks(sc: Scenario) -> list[str]:
    """Checks that span sections (each problem names a field and the allowed values)."""
    problems: list[str] = []
    fed, data = sc.federation, sc.data
    if fed.active_clients > fed.num_clients:
        problems.append(
            f"federation.active_clients: {fed.active_clients} exceeds federation.num_clients "
            f"({fed.num_clients}); choose 1..{fed.num_clients}"
        )
    meta = DATASETS[data.dataset]
    classes = data.synthetic_classes if data.dataset == "synthetic" else meta.num_classes
    if data.partition == "shard" and (data.shards_per_client * fed.num_clients) % classes:
        problems.append(
            f"data.shards_per_client: shards_per_client·num_clients = {data.shards_per_client}·"
            f"{fed.num_clients} must be a multiple of the {classes} classes of {data.dataset}"
        )
    if data.partition == "natural" and data.dataset != "femnist":
        problems.append("data.partition: 'natural' (one client per writer) needs data.dataset = 'femnist'")
    channels = data.synthetic_channels if data.dataset == "synthetic" else meta.channels
    size = data.synthetic_image_size if data.dataset == "synthetic" else meta.image_size
    if data.crop_size > size:
        problems.append(
            f"data.crop_size: {data.crop_size} exceeds the {size}×{size} images of {data.dataset}; use at "
            f"most {size} (0 = no crop)"
        )
    elif data.crop_size:
        size = data.crop_size
    problems += validate_model_config(sc.model, channels, size, classes)
    problems += sc.system.timing.algorithm_problems(sc.algorithm.name)
    problems += _reference_problems(sc.reference)
    spec = sc.algorithm_spec
    if sc.model.aux and not spec.aux_heads:
        problems.append(
            f"model.aux: {sc.algorithm.name!r} trains no auxiliary head (the head would be built and never "
            "used); set model.aux = '' (auxiliary heads are for local-loss methods such as cse_fsl, fsl_an; "
            "a method that trains one says so with AlgorithmSpec.aux_heads = True)"
        )
    if sc.system.compute.training_time == "per-device" and not spec.per_device_times:
        problems.append(
            f"system.compute.training_time: 'per-device' is not available for {sc.algorithm.name!r}, which "
            "does not declare per-device job times; choose 'per-sample' (it is available for FedASMU, "
            "FedSSMU, the FL baselines, GAS and Lightweight FedSL; a method declares it with "
            "AlgorithmSpec.per_device_times = True)"
        )
    if sc.train.lr_decay != 1.0 and not spec.train_lr_decay:
        problems.append(
            f"train.lr_decay: {sc.train.lr_decay} is applied by the full-model FL methods' policy only, not "
            f"by {sc.algorithm.name!r}; use 1 (FedASMU and FedSSMU decay with algorithm.params.lr_decay; a "
            "method that applies it says so with AlgorithmSpec.train_lr_decay = True)"
        )
    params: Any
    try:
        params = build(spec.params, sc.algorithm.params, "algorithm.params")
    except ConfigError as err:
        problems += err.problems
    else:
        problems += _single_pool_problems(sc, spec, params)
        problems += spec.validate(sc, params) if spec.validate else []
    return problems


def _single_pool_problems(sc: Scenario, spec: AlgorithmSpec, params: Any) -> list[str]:
    """A method whose options share state among all clients (``AlgorithmSpec.single_pool``) needs one pool."""
    why = spec.single_pool(params) if spec.single_pool else None
    eng, k = sc.engine, sc.federation.num_clients
    if why is None or (eng.pools == 1 and (eng.clients_per_pool == 0 or eng.clients_per_pool >= k)):
        return []
    reason, instead = why
    return [f"{reason} needs engine.pools = 1 and engine.clients_per_pool = 0; {instead}"]


def _spec_or_problems(name: Any) -> tuple[AlgorithmSpec | None, list[str]]:
    """The spec ``algorithm.name`` names, or the problems saying why it names none (a non-string: none)."""
    if not isinstance(name, str):  # build()'s type error
        return None, []
    try:
        return resolve(name), []
    except UnknownAlgorithmError as err:
        return None, err.problems


def _params_problems(spec: AlgorithmSpec | None, algo: Any) -> list[str]:
    """The problems of ``[algorithm.params]`` alone, so they are listed together with all the others."""
    params = algo.get("params", {}) if isinstance(algo, Mapping) else {}
    if spec is None or not isinstance(params, Mapping):
        return []
    try:
        build(spec.params, params, "algorithm.params")
    except ConfigError as err:
        return err.problems
    return []


def scenario_from_dict(data: Mapping[str, Any], overrides: Sequence[str] = ()) -> Scenario:
    """Build and validate a :class:`Scenario` from a nested mapping plus ``key=value`` overrides."""
    raw = apply_overrides(copy.deepcopy(dict(data)), overrides)
    algo = raw.get("algorithm", {})
    name = algo.get("name", "gas") if isinstance(algo, Mapping) else "gas"
    spec, problems = _spec_or_problems(name)
    try:
        sc = build(Scenario, raw)
    except ConfigError as err:
        raise ConfigError(problems + err.problems + _params_problems(spec, algo)) from None
    if not problems:
        problems += _cross_checks(sc)
    if problems:
        raise ConfigError(problems)
    sc.params  # noqa: B018 - built here, once; every later access reads the cached value
    return sc


def resolve_trace_file(raw: dict[str, Any], base: Path) -> None:
    """Make a relative ``system.trace_file`` of the raw scenario ``raw`` absolute, from ``base`` (in place).

    Any other value (absolute, empty, not a string) is left as it is, for :func:`~raysfl.config.build` to
    check.
    """
    system = raw.get("system")
    value = system.get("trace_file") if isinstance(system, dict) else None
    if not isinstance(value, str) or not value or Path(value).is_absolute():
        return
    joined = base / value
    try:
        system["trace_file"] = str(joined.resolve())  # type: ignore[index]
    except (OSError, ValueError, RuntimeError):  # a NUL (build() names it), a symlink loop: joined as given
        system["trace_file"] = str(joined.absolute())  # type: ignore[index]


def load_scenario(path: str | Path, overrides: Sequence[str] = ()) -> Scenario:
    """Load a scenario TOML file, apply overrides, validate; one :class:`ConfigError` lists all problems.

    A file that sets no key at all is refused: it would silently start the full default run (an empty file
    is nearly always a mistake). Without a ``name`` the scenario is named after the file.

    A relative ``system.trace_file`` is relative to the scenario file's folder when the file sets it, and to
    the working directory when an override sets it; either way the scenario holds the absolute path, so the
    run's ``config.toml`` records it and a resumed run finds the same file from any directory.
    """
    raw = read_toml(path)
    if not raw:
        d = Scenario()
        raise ConfigError(
            [
                f"{path} sets no key; every value would be a default (the full {d.algorithm.name} run on "
                f"{d.data.dataset} with {d.model.name}, T = {d.train.global_iterations}). Start from "
                'scenarios/default.toml, or write at least `name = "..."` to take every other default'
            ],
            source=str(path),
        )
    raw.setdefault("name", name_from_stem(Path(path).stem))
    try:
        resolve_trace_file(raw, Path(path).parent)  # the file's own path: from its folder
        raw = apply_overrides(raw, overrides)
        resolve_trace_file(raw, Path.cwd())  # still relative, so an override's: from the working directory
        return scenario_from_dict(raw)
    except ConfigError as err:
        raise ConfigError(err.problems, source=str(path)) from None


def scenario_to_dict(sc: Scenario) -> dict[str, Any]:
    """The resolved scenario as plain data, algorithm parameters filled with their defaults."""
    out = to_dict(sc)
    out["algorithm"]["params"] = to_dict(sc.params)
    return out


def unread_options(values: Mapping[str, Any]) -> list[str]:
    """Dotted names of the options a scenario's values leave unread, the algorithm's parameters included.

    ``values`` is a scenario as plain data (a run's ``config.toml``). The sections' options come from
    :func:`raysfl.config.unused_options` over :class:`Scenario`; ``algorithm.params`` is walked with the
    named algorithm's Params class (GAS's ``la_tau`` when ``logit_adjustment = false``). An algorithm that
    cannot be found here (a plug-in not installed) leaves its parameters out of the list.

    Example:
        >>> values = {"data": {"partition": "iid"},
        ...           "algorithm": {"name": "fedsa", "params": {"lr_scaling": "none"}}}
        >>> [n for n in unread_options(values) if n.startswith(("data.alpha", "algorithm."))]
        ['data.alpha', 'algorithm.params.lr_scale_max']
    """
    unread = unused_options(Scenario, values)
    algorithm = values.get("algorithm")
    params = algorithm.get("params") if isinstance(algorithm, Mapping) else None
    cls = _algorithm_params(values)
    if cls is None or not isinstance(params, Mapping):
        return unread
    return unread + unused_options(cls, params, "algorithm.params.")


def diagnostic_keys(values: Mapping[str, Any]) -> list[str]:
    """Dotted names of a scenario's diagnostic options, the algorithm's parameters included.

    A diagnostic option (``option(diagnostic=True)``: GAS's ``dissimilarity_every``) adds measurements and
    changes none of the run's numbers (:func:`raysfl.config.diagnostic_options`). ``values`` is a scenario as
    plain data; an algorithm that cannot be found here (a plug-in not installed) adds none.

    Example:
        >>> [k for k in diagnostic_keys({"algorithm": {"name": "gas"}}) if k.startswith("algorithm.")]
        ['algorithm.params.dissimilarity_every', 'algorithm.params.dissimilarity_samples']
    """
    keys = diagnostic_options(Scenario)
    cls = _algorithm_params(values)
    return keys if cls is None else keys + diagnostic_options(cls, "algorithm.params.")


def _algorithm_params(values: Mapping[str, Any]) -> type | None:
    """The Params class of the algorithm a scenario names (``None``: a plug-in not installed here).

    ``values`` is the scenario as plain data; without an algorithm name it is the default algorithm's.
    """
    algorithm = values.get("algorithm")
    table = algorithm if isinstance(algorithm, Mapping) else {}
    try:
        return resolve(str(table.get("name", AlgorithmConfig().name))).params
    except UnknownAlgorithmError:
        return None
