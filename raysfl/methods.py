"""Find the :class:`AlgorithmSpec` that ``algorithm.name`` names: built in, an import path or a plug-in.

Three kinds of names, tried in this order:

* a built-in method: a key of the literal registry ``raysfl.algorithms.ALGORITHMS`` (``"fedasync"``);
* an import path ``"package.module:ATTR"``: the module is imported (the current directory first on the
  path, as ``python -m`` does) and ``ATTR``, a plain name, is read from the module's own namespace, never
  through attributes of other objects;
* the name of an entry point in the group :data:`ENTRY_POINT_GROUP` of an installed distribution, e.g.
  ``[project.entry-points."raysfl.algorithms"] my_method = "my_package.my_method:SPEC"``.

A spec found by path or entry point is checked (:func:`raysfl.api.check_spec`, and its state classes by
:func:`raysfl.engine.snapshot.state_classes`: each must be defined under its name in its own module) and
remembered by the name that found it (:func:`loaded_specs`), so the checkpoint allow-list includes them.
Pools and the server actor resolve the same name from the scenario, so they import the method the same
way (a Ray worker has the driver's working directory on its path).
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from raysfl.algorithms.base import AlgorithmSpec

ENTRY_POINT_GROUP = "raysfl.algorithms"
"""The entry-point group through which an installed package offers methods."""

_LOADED: dict[str, AlgorithmSpec] = {}


class UnknownAlgorithmError(ValueError):
    """``algorithm.name`` names no method; ``problems`` say why, each starting with the field."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (a sweep trial's error crossing Ray) with its own arguments, not the joined message."""
        return (type(self), (self.problems,))


def is_import_path(name: str) -> bool:
    """Whether ``name`` has the shape ``module:ATTR``."""
    return ":" in name


def plugin_entry_points() -> dict[str, EntryPoint]:
    """The installed entry points of :data:`ENTRY_POINT_GROUP`, by name (the first of a duplicate wins)."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def known_names() -> list[str]:
    """The built-in method names, then the installed plug-ins' names."""
    from raysfl.algorithms import ALGORITHMS

    return [*ALGORITHMS, *(n for n in plugin_entry_points() if n not in ALGORITHMS)]


def loaded_specs() -> list[AlgorithmSpec]:
    """The specs found by import path or entry point in this process so far."""
    return list(_LOADED.values())


def _import_module(module: str, name: str) -> object:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)  # as `python -m`: a method beside the scenario's working directory is found
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name and (module == err.name or module.startswith(err.name + ".")):
            raise UnknownAlgorithmError(
                [
                    f"algorithm.name: {name!r}: no module named {err.name!r} (looked in the current "
                    "directory and on PYTHONPATH; write package.module:ATTR)"
                ]
            ) from None
        raise UnknownAlgorithmError(
            [f"algorithm.name: {name!r}: importing {module!r} failed: {type(err).__name__}: {err}"]
        ) from None
    except Exception as err:  # noqa: BLE001 - the method's own import-time error, reported as input error
        raise UnknownAlgorithmError(
            [f"algorithm.name: {name!r}: importing {module!r} failed: {type(err).__name__}: {err}"]
        ) from None


def _from_import_path(name: str) -> object:
    module, _, attr = name.partition(":")
    if not module or not attr.isidentifier() or any(not p.isidentifier() for p in module.split(".")):
        raise UnknownAlgorithmError(
            [f"algorithm.name: {name!r} is not an import path; write package.module:ATTR (ATTR a plain name)"]
        )
    mod = _import_module(module, name)
    if attr not in vars(mod):
        raise UnknownAlgorithmError(
            [f"algorithm.name: {name!r}: module {module!r} has no attribute {attr!r}"]
        )
    return vars(mod)[attr]


def _checked(name: str, found: object) -> AlgorithmSpec:
    from raysfl.api import check_spec
    from raysfl.engine.snapshot import SnapshotError, state_classes

    where = f"algorithm.name: {name!r}"
    problems = check_spec(found, where)
    if problems:
        raise UnknownAlgorithmError(problems)
    assert isinstance(found, AlgorithmSpec)
    try:
        state_classes([found])
    except SnapshotError as err:
        raise UnknownAlgorithmError([f"{where}: {err}"]) from None
    return found


def resolve(name: str) -> AlgorithmSpec:
    """The spec ``name`` names (see the module docstring); :class:`UnknownAlgorithmError` if none."""
    from raysfl.algorithms import ALGORITHMS

    if name in ALGORITHMS:
        return ALGORITHMS[name]
    if name in _LOADED:
        return _LOADED[name]
    if is_import_path(name):
        spec = _checked(name, _from_import_path(name))
    else:
        eps = plugin_entry_points()
        if name not in eps:
            known = known_names()
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UnknownAlgorithmError(
                [
                    f"algorithm.name: {name!r} is not a known method{hint}; choose one of "
                    f"{', '.join(known)}, or name your own as package.module:SPEC"
                ]
            )
        try:
            found = eps[name].load()
        except Exception as err:  # noqa: BLE001 - a broken plug-in is reported, not raised through
            raise UnknownAlgorithmError(
                [f"algorithm.name: {name!r}: loading entry point {eps[name].value!r} failed: {err}"]
            ) from None
        spec = _checked(name, found)
    _LOADED[name] = spec
    return spec
