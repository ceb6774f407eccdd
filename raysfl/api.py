"""The public method API: everything a method written outside raysfl needs, typed, in one module.

A method is an :class:`AlgorithmSpec` whose three factories build the three pieces of logic the engine runs:

* :class:`ClientLogic` runs inside a client pool. One object serves every virtual client the pool hosts;
  what belongs to one client lives in the state object :meth:`ClientLogic.init_state` returns, which the
  pool keeps and passes as the first argument of every call for that client.
* :class:`ServerLogic` runs inside the server actor (one per run) and owns the global model.
* :class:`Policy` runs in the coordinator. It sees event times, client ids, sizes and scalars only, never
  tensors, and answers with actions (:class:`Call`, :class:`Schedule`, :class:`Report`, :class:`Log`,
  :class:`Stop`). Every duration it schedules comes from the run's time model.

Nothing here imports Ray. A spec is checked when a scenario names it (:func:`check_spec`): a factory that is
a class, or that states the class it returns, must provide every member of its protocol, or loading fails
with a message naming the missing member. The objects the factories build are checked again when they are
built (:func:`check_logic`).

Between calls, client states, client logic, server logic and the policy may keep plain data (numbers,
strings, lists, dicts, dataclasses), numpy arrays and generators, torch tensors, modules and optimizers,
but no autograd graph and no open handle: checkpoints capture them with ``raysfl.engine.snapshot``, and
every class of an object they keep must be listed in ``AlgorithmSpec.state_classes``.

Two helpers give a method the server-side loops the built-in methods use: :func:`evaluate_model` (top-1
accuracy and mean cross-entropy of a whole model on the test set, in cache-sized chunks on the CPU, one
device read per evaluation) and :func:`load_into` (a state dict into a module in place, without
``load_state_dict``'s wait per tensor on a GPU). :func:`batch_size_at` is the size of a client's n-th
minibatch, less than B for an epoch's last one, for a policy that charges each step's bytes and FLOPs.
:func:`make_optimizer` builds the optimizer the scenario's ``[train]`` section describes (``optimizer``,
``lr``, ``momentum``, ``weight_decay``), as the built-in methods do: the engine applies none of ``[train]``
for a method, which reads what it supports.

A client whose model has random layers (dropout) runs them under :func:`seeded_if` with its own generator
(:func:`draws_randomness` tells whether a model has such layers), so its masks do not depend on the pool; a
split client that recomputes its forward pass for the backward does so under :func:`replaying_rng` with the
RNG state saved before the first pass, so the masks are the same.

``docs/writing-a-method.md`` builds a complete method from zero on top of this module.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any

from raysfl.algorithms.actions import (
    CLIENT,
    SERVER,
    Action,
    Call,
    Event,
    EventData,
    Log,
    LogRow,
    Report,
    Schedule,
    Slot,
    Stop,
)
from raysfl.algorithms.base import AlgorithmSpec, RunSetup
from raysfl.algorithms.common.batching import batch_size_at
from raysfl.algorithms.common.device import load_into
from raysfl.algorithms.common.evaluate import evaluate_model
from raysfl.algorithms.common.optim import make_optimizer
from raysfl.algorithms.common.own_rng import draws_randomness, replaying_rng, seeded_if
from raysfl.algorithms.protocols import ClientLogic, Policy, ServerLogic
from raysfl.config import Above, Below, default_problems, option
from raysfl.metrics.columns import event_column_problems
from raysfl.models.flops import ModelProfile
from raysfl.models.split import SplitModel
from raysfl.system.durations import TimeModel

ClientFactory = Callable[..., ClientLogic]
"""``(setup, model, train_x, train_y, transform) -> ClientLogic``, called once in every pool; ``model`` is a
:class:`SplitModel` (``client``, ``server``, ``full()``)."""
ServerFactory = Callable[..., ServerLogic]
"""``(setup, model, test_x, test_y, seed, device) -> ServerLogic``, called once in the server actor."""
PolicyFactory = Callable[..., Policy]
"""``(setup, time_model, model_profile, rng) -> Policy``, called once in the coordinator: a
:class:`TimeModel` (every emulated duration: ``compute_s``, ``upload_s``, ``download_s``, ``server_s``), a
:class:`ModelProfile` (per-sample FLOPs and byte sizes of the split model) and the policy's own
``numpy.random.Generator``."""

FAMILIES = ("split", "fl")
"""The values of :attr:`AlgorithmSpec.family`: split learning (the model cut between client and server), or
full-model federated learning."""

ROLES: tuple[tuple[str, type], ...] = (
    ("make_client", ClientLogic),
    ("make_server", ServerLogic),
    ("make_policy", Policy),
)
"""Each factory field of :class:`AlgorithmSpec` and the protocol the object it builds satisfies."""


def members(protocol: type) -> tuple[str, ...]:
    """The methods a class must have to satisfy ``protocol`` (in declaration order)."""
    return tuple(n for n, v in vars(protocol).items() if not n.startswith("_") and inspect.isfunction(v))


def missing_members(obj: Any, protocol: type) -> list[str]:
    """The members of ``protocol`` that ``obj`` (a class or an instance) lacks or has as non-callables."""
    return [m for m in members(protocol) if not callable(getattr(obj, m, None))]


def signature_mismatches(obj: Any, protocol: type) -> list[str]:
    """Members of ``obj`` (a class or an instance) that cannot be called as ``protocol`` calls them.

    Example: ``init_state(self, client, indices)`` for ``ClientLogic.init_state(client, indices, seed_seq)``
    gives ``["init_state(self, client, indices) cannot take (client, indices, seed_seq)"]``.
    """
    out = []
    for name in members(protocol):
        impl = getattr(obj, name, None)
        if not callable(impl):
            continue
        try:
            sig = inspect.signature(impl)
        except (TypeError, ValueError):  # a builtin or C callable: nothing to read
            continue
        wanted = list(inspect.signature(getattr(protocol, name)).parameters)[1:]  # without self
        needs_self = isinstance(obj, type) and inspect.isfunction(inspect.getattr_static(obj, name, None))
        try:
            sig.bind(*([None] * (len(wanted) + needs_self)))
        except TypeError:
            out.append(f"{name}{sig} cannot take ({', '.join(wanted)})")
    return out


def _built_class(factory: Any) -> type | None:
    """The class a factory builds, when it says: the factory itself, or its resolvable return annotation."""
    if isinstance(factory, type):
        return factory
    try:
        ret = typing.get_type_hints(factory).get("return")
    except Exception:  # noqa: BLE001 - an annotation naming a local or a missing name: not checkable here
        return None
    return ret if isinstance(ret, type) and ret is not Any else None


def _missing_message(where: str, cls_name: str, field: str, protocol: type, missing: list[str]) -> str:
    wanted = ", ".join(members(protocol))
    return (
        f"{where}: {field} builds {cls_name}, which lacks {', '.join(missing)} "
        f"(a {protocol.__name__} needs {wanted}; see raysfl.api.{protocol.__name__})"
    )


def check_spec(spec: Any, where: str = "algorithm.name") -> list[str]:
    """The reasons ``spec`` cannot be run, each naming ``where`` and the member at fault; empty when it can.

    Checks that ``spec`` is an :class:`AlgorithmSpec`, that ``params`` is a frozen dataclass, that ``family``
    is one of :data:`FAMILIES`, that the factories are callables and that each factory whose built class is
    known (a class, or a function annotated with one) builds a class providing every member of its
    protocol, each callable with the protocol's arguments.
    """
    import dataclasses

    if not isinstance(spec, AlgorithmSpec):
        return [f"{where}: names a {type(spec).__name__}, not a raysfl.api.AlgorithmSpec"]
    problems = []
    if not (isinstance(spec.params, type) and dataclasses.is_dataclass(spec.params)):
        problems.append(f"{where}: AlgorithmSpec {spec.name!r}.params is not a dataclass ({spec.params!r})")
    elif not getattr(spec.params, "__dataclass_params__").frozen:  # noqa: B009 - not in the type stubs  # a run's options must not change under it
        problems.append(
            f"{where}: AlgorithmSpec {spec.name!r}.params is not frozen; declare it @dataclass(frozen=True)"
        )
    else:
        defaults = default_problems(spec.params)
        problems += [f"{where}: AlgorithmSpec {spec.name!r}.params: {p}" for p in defaults]
    if spec.family not in FAMILIES:
        problems.append(
            f"{where}: AlgorithmSpec {spec.name!r}.family is {spec.family!r}; it is one of "
            f"{', '.join(map(repr, FAMILIES))}"
        )
    for field, protocol in ROLES:
        factory = getattr(spec, field)
        if not callable(factory):
            problems.append(f"{where}: AlgorithmSpec {spec.name!r}.{field} is not callable ({factory!r})")
            continue
        cls = _built_class(factory)
        if cls is None:  # a factory that does not say what it builds: checked when it is called
            continue
        missing = missing_members(cls, protocol)
        if missing:
            problems.append(_missing_message(where, cls.__qualname__, field, protocol, missing))
        for mismatch in signature_mismatches(cls, protocol):
            problems.append(
                f"{where}: {field} builds {cls.__qualname__}, whose {mismatch} as raysfl.api."
                f"{protocol.__name__} calls it"
            )
    for field in ("train_lr_decay", "aux_heads"):
        if not isinstance(getattr(spec, field), bool):
            problems.append(f"{where}: AlgorithmSpec {spec.name!r}.{field} must be True or False")
    for field in ("validate", "single_pool"):
        if getattr(spec, field) is not None and not callable(getattr(spec, field)):
            problems.append(f"{where}: AlgorithmSpec {spec.name!r}.{field} is not callable")
    if not all(isinstance(c, type) for c in spec.state_classes):
        problems.append(f"{where}: AlgorithmSpec {spec.name!r}.state_classes must be a tuple of classes")
    if not isinstance(spec.event_columns, Mapping):
        problems.append(f"{where}: AlgorithmSpec {spec.name!r}.event_columns must map column names to types")
    else:
        for problem in event_column_problems(spec.event_columns):
            problems.append(f"{where}: AlgorithmSpec {spec.name!r}.event_columns: {problem}")
    bad = [s for s in spec.smoke if not isinstance(s, str) or "=" not in s]
    if bad:
        problems.append(f"{where}: AlgorithmSpec {spec.name!r}.smoke: {bad!r} are not dotted.key=value")
    return problems


def check_logic(obj: Any, protocol: type, spec: AlgorithmSpec) -> Any:
    """``obj`` when it provides every member of ``protocol``, callable with its arguments.

    Raises:
        TypeError: naming the members ``obj`` lacks, or those it cannot call as ``protocol`` does.
    """
    missing = missing_members(obj, protocol)
    field = next(f for f, p in ROLES if p is protocol)
    where = f"AlgorithmSpec {spec.name!r}"
    if missing:
        raise TypeError(_missing_message(where, type(obj).__qualname__, field, protocol, missing))
    mismatches = signature_mismatches(obj, protocol)
    if mismatches:
        raise TypeError(
            f"{where}: {field} builds {type(obj).__qualname__}, whose {'; '.join(mismatches)} as "
            f"raysfl.api.{protocol.__name__} calls it"
        )
    return obj


__all__ = [
    "CLIENT",
    "SERVER",
    "Above",
    "Action",
    "AlgorithmSpec",
    "Below",
    "Call",
    "ClientFactory",
    "ClientLogic",
    "Event",
    "EventData",
    "Log",
    "LogRow",
    "ModelProfile",
    "Policy",
    "PolicyFactory",
    "Report",
    "RunSetup",
    "Schedule",
    "ServerFactory",
    "ServerLogic",
    "Slot",
    "SplitModel",
    "Stop",
    "TimeModel",
    "batch_size_at",
    "check_logic",
    "check_spec",
    "draws_randomness",
    "evaluate_model",
    "load_into",
    "make_optimizer",
    "members",
    "missing_members",
    "option",
    "replaying_rng",
    "seeded_if",
    "signature_mismatches",
]
