"""raysfl: a Ray-based cluster simulator for asynchronous split federated learning."""

import importlib.util
import sys
import tomllib
from pathlib import Path

__version__ = "0.1.0"


def _bind_the_checkouts_actor_shells() -> None:
    """In a source checkout, make ``raysfl.actors`` the ``actors/`` folder beside this ``raysfl/``.

    An installed wheel holds the shells as ``raysfl/actors/``. A source checkout holds them in the top-level
    folder ``actors/``, which an editable install maps to ``raysfl.actors`` by a fixed path. A second
    checkout put ahead of it (``PYTHONPATH``, e.g. a ``git worktree`` of an older commit) would then run its
    own ``raysfl`` with the installed checkout's shells, on the driver and on every Ray worker, while
    recording its own commit. Binding the shells that sit beside the imported package keeps a run's code
    from one checkout, and lets a checkout on ``PYTHONPATH`` run on Ray with no install at all. Importing
    the shells' package runs only its docstring; Ray is imported by its modules (``raysfl.actors.server``
    ...), as before.
    """
    root = Path(__file__).resolve().parent.parent
    shells = root / "actors"
    if "raysfl.actors" in sys.modules or not (shells / "client_pool.py").is_file():
        return
    try:  # the checkout of raysfl itself, not a project that vendors this package beside actors/ of its own
        with open(root / "pyproject.toml", "rb") as project:
            if tomllib.load(project).get("project", {}).get("name") != "raysfl":
                return
    except (OSError, tomllib.TOMLDecodeError):
        return
    spec = importlib.util.spec_from_file_location(
        "raysfl.actors", shells / "__init__.py", submodule_search_locations=[str(shells)]
    )
    if spec is None or spec.loader is None:  # pragma: no cover - a plain .py file always has a loader
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["raysfl.actors"] = module
    spec.loader.exec_module(module)
    globals()["actors"] = module  # what an ordinary import of a subpackage sets on its parent


_bind_the_checkouts_actor_shells()
