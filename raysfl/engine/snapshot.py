"""Safe, generic snapshots of live run state (policies, client states, server logic) for checkpoints.

:func:`capture` turns an object graph into a tree of plain data and tensors — the only types
``torch.load(weights_only=True)`` accepts — and :func:`rebuild` turns such a tree back into objects.
Nothing in a checkpoint can run code when it is loaded. Objects are recreated only from an allow-list of
*state classes* (:func:`state_classes`): the engine's own (:func:`engine_state_classes`) and, for every
registered method, its ``Params`` class and the classes it declares in ``AlgorithmSpec.state_classes``.
A class is named by ``module:qualname`` and looked up in that list, never imported or reached through
attributes; it is created with ``object.__new__`` and its fields set with ``object.__setattr__``, never
through its constructor, ``__setstate__`` or a finaliser (a state class may not define ``__del__``).
Optimizers are recreated only as one of :data:`OPTIMIZERS`, numpy bit generators only as one of
:data:`BIT_GENERATORS`. A checkpoint naming anything else is refused (:func:`check_tree` finds it before a
run touches anything), so a checkpoint file is as safe to open as a scenario file.

What the tree keeps:
    * identity: an object reachable twice (a tensor held by a dict and by an optimizer) is stored once
      and comes back as one object;
    * tensors with ``requires_grad``, ``nn.Parameter`` and ``.grad``; numpy arrays and scalars;
    * numpy ``Generator`` / ``SeedSequence`` and ``torch.Generator`` states, so every random stream
      continues exactly where it stopped;
    * ``nn.Module``: its parameters, buffers and train/eval flag, restored *into* the module that a
      fresh build of the same scenario creates (modules are never constructed from a snapshot);
    * optimizers: class, parameter groups (bound to the restored tensors) and per-parameter state;
    * functions and bound methods (transforms, hooks): not stored; the fresh build's own are kept, as
      code is configuration, not state.

``externals`` name objects that a fresh build recreates identically (the scenario, the training data,
the test tensors, the time model): they are stored by name, not by value, and supplied again on rebuild.

A tensor that still carries an autograd graph cannot be snapshotted; :class:`SnapshotError` names where
it is. Split clients therefore keep their cut-layer input, not the graph, between calls
(``raysfl.algorithms.common.split_client``).
"""

from __future__ import annotations

import collections
import enum
import functools
import sys
import types
from collections.abc import Iterable
from pathlib import Path, PurePath
from typing import Any

import numpy as np
import torch
from torch import nn

from raysfl.safe_write import replace_file

_CODE = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)
_PRIMITIVES = (str, int, float, bool, type(None))

OPTIMIZERS: tuple[type[torch.optim.Optimizer], ...] = (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW)
"""The optimizer classes a snapshot may recreate (the ones ``raysfl.algorithms`` builds, and AdamW)."""

BIT_GENERATORS: dict[str, type[np.random.BitGenerator]] = {
    g.__name__: g for g in (np.random.PCG64, np.random.PCG64DXSM, np.random.Philox, np.random.SFC64,
                            np.random.MT19937)
}  # fmt: skip
"""The numpy bit generators a snapshot may recreate, by the name their state carries."""

_NUMPY_SCALAR_KINDS = "biufc?"  # bool, integers, floats, complex: no object or string scalars
_TREE_CLASS_NODES = ("obj", "enum", "optim")


class SnapshotError(RuntimeError):
    """An object cannot be captured or restored; the message names its path in the object graph."""


def _class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _defined_in_its_module(cls: type) -> bool:
    """Whether ``cls`` is what its module's namespace holds under its qualified name (no aliases, no locals).

    The lookup reads namespaces (``vars``) only: it never follows an attribute into another module.
    """
    module = sys.modules.get(cls.__module__)
    if module is None or "<locals>" in cls.__qualname__:
        return False
    obj: Any = module
    for part in cls.__qualname__.split("."):
        obj = vars(obj).get(part)
        if obj is None:
            return False
    return obj is cls


def check_state_class(cls: Any, declared_by: str) -> type:
    """``cls`` if it may be a state class, else a :class:`SnapshotError` naming ``declared_by``.

    A state class is a plain class defined at its module's top level (or nested in such a class), not an
    exception, module, optimizer or protocol, without a finaliser (``__del__``) and without its own
    ``__new__`` (enums excepted: they are restored by value): a snapshot creates it with ``object.__new__``
    and sets its fields, and nothing of it runs when it is restored or freed.
    """
    if not isinstance(cls, type):
        raise SnapshotError(f"{declared_by}: {cls!r} is not a class")
    name = _class_path(cls)
    if not _defined_in_its_module(cls):
        raise SnapshotError(f"{declared_by}: {name} is not defined under that name in its module")
    special = (BaseException, nn.Module, torch.optim.Optimizer)
    if issubclass(cls, special) or getattr(cls, "_is_protocol", False):
        raise SnapshotError(f"{declared_by}: {name} is an exception, module, optimizer or protocol")
    if any("__del__" in vars(base) for base in cls.__mro__):
        raise SnapshotError(f"{declared_by}: {name} defines __del__; state classes may not have finalisers")
    if not issubclass(cls, enum.Enum) and cls.__new__ is not object.__new__:
        raise SnapshotError(f"{declared_by}: {name} has its own __new__; state classes are plain classes")
    return cls


def engine_state_classes() -> tuple[type, ...]:
    """The classes the engine itself keeps in checkpointed state (events, slots, totals, shared configs)."""
    from raysfl.algorithms.actions import Event, Slot
    from raysfl.algorithms.config import FederationConfig, TrainConfig
    from raysfl.engine.loop import Totals
    from raysfl.models.split import SplitModel

    return (Event, Slot, Totals, TrainConfig, FederationConfig, SplitModel)


def state_classes(specs: Iterable[Any] | None = None) -> dict[str, type]:
    """``module:qualname`` → class for every class a snapshot may hold: the allow-list of restoring.

    Built from :func:`engine_state_classes` and, for each algorithm spec (default: every method in
    ``raysfl.algorithms.ALGORITHMS`` and every method this process found by import path or entry point,
    :func:`raysfl.methods.loaded_specs`), its ``params`` class and its ``state_classes``. A
    method outside this package declares its classes the same way, in its own
    ``AlgorithmSpec.state_classes``; each must be defined under its name in its own module.
    """
    if specs is None:
        from raysfl.algorithms import ALGORITHMS
        from raysfl.methods import loaded_specs

        specs = [*ALGORITHMS.values(), *loaded_specs()]
    specs = tuple(specs)
    for checked, allowed in _LAST_CHECKED:  # every capture asks, a checkpoint once per client: check once
        if len(checked) == len(specs) and all(a is b for a, b in zip(checked, specs, strict=True)):
            return dict(allowed)
    allowed = {_class_path(c): check_state_class(c, "the engine") for c in engine_state_classes()}
    for spec in specs:
        where = f"AlgorithmSpec {spec.name!r}.state_classes"
        for cls in (spec.params, *spec.state_classes):
            allowed[_class_path(cls)] = check_state_class(cls, where)
    _LAST_CHECKED[:] = [(specs, dict(allowed))]
    return allowed


_LAST_CHECKED: list[tuple[tuple[Any, ...], dict[str, type]]] = []
"""The specs :func:`state_classes` last checked, with their allow-list. The spec objects themselves are
kept, and a call with the very same specs (by identity, in order) gets that list without checking again."""


def _require_class(allowed: dict[str, type], path: Any, where: str) -> type:
    """The allowed class named ``path``; never imports a module or follows an attribute."""
    cls = allowed.get(path) if isinstance(path, str) else None
    if cls is None:
        raise SnapshotError(
            f"{where}: class {path!r} is not one that raysfl checkpoints; refusing to create it "
            "(checkpoints recreate only the engine's and the registered methods' state classes)"
        )
    return cls


def _check_fields(attrs: Any, cls: str, path: str) -> None:
    if not isinstance(attrs, dict):
        raise SnapshotError(f"{path}: the fields of {cls} are not a mapping")
    for k in attrs:
        if not isinstance(k, str) or (k.startswith("__") and k.endswith("__")):
            raise SnapshotError(f"{path}: attribute {k!r} of {cls} is not a field")


def check_tree(tree: Any, allowed: dict[str, type] | None = None) -> None:
    """Refuse a tree that names a class outside the allow-list, before anything is rebuilt from it.

    Walks every node (a loaded checkpoint is plain data: dicts, lists, tensors) and checks each object,
    enum and optimizer class; a :class:`SnapshotError` names the first offending node.
    """
    allowed = state_classes() if allowed is None else allowed
    optimizers = {_class_path(c): c for c in OPTIMIZERS}
    stack: list[tuple[Any, str]] = [(tree, "state")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            kind = node.get("t")
            if kind in _TREE_CLASS_NODES:
                _require_class(optimizers if kind == "optim" else allowed, node.get("cls"), path)
            if kind == "obj":
                _check_fields(node.get("attrs"), node["cls"], path)
            stack.extend((v, f"{path}.{k}") for k, v in node.items())
        elif isinstance(node, (list, tuple)):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(node))


def _big_int(value: int) -> Any:
    """Integers beyond int64 (PCG64 states, SeedSequence entropy) travel as strings."""
    if -(2**63) <= value < 2**63:
        return value
    return {"t": "bigint", "v": str(value)}


class _Capture:
    def __init__(self, externals: dict[int, str], allowed: dict[str, type]) -> None:
        self.externals = externals
        self.allowed = allowed
        self.memo: dict[int, int] = {}
        self.keep: list[Any] = []  # keep captured objects alive so ids stay unique

    def _remember(self, obj: Any) -> int:
        n = len(self.memo)
        self.memo[id(obj)] = n
        self.keep.append(obj)
        return n

    def __call__(self, obj: Any, path: str) -> Any:
        if isinstance(obj, bool) or obj is None or isinstance(obj, (str, float)):
            return obj
        if isinstance(obj, int) and not isinstance(obj, enum.Enum):
            return _big_int(int(obj))
        if id(obj) in self.externals:
            return {"t": "ext", "name": self.externals[id(obj)]}
        if id(obj) in self.memo:
            return {"t": "ref", "id": self.memo[id(obj)]}
        if isinstance(obj, _CODE):
            return {"t": "keep", "what": getattr(obj, "__qualname__", type(obj).__name__)}
        if isinstance(obj, torch.Tensor):
            return self._tensor(obj, path)
        if isinstance(obj, np.ndarray):
            if obj.dtype == object:
                raise SnapshotError(f"{path}: numpy object arrays cannot be snapshotted")
            n = self._remember(obj)
            return {"t": "ndarray", "id": n, "data": torch.from_numpy(np.ascontiguousarray(obj).copy())}
        if isinstance(obj, np.generic):
            return {"t": "npscalar", "dtype": obj.dtype.str, "v": obj.item()}
        if isinstance(obj, np.random.Generator):
            n = self._remember(obj)
            return {"t": "npgen", "id": n, "state": self(obj.bit_generator.state, path + ".state")}
        if isinstance(obj, np.random.SeedSequence):
            n = self._remember(obj)
            fields = {
                "entropy": obj.entropy,
                "spawn_key": list(obj.spawn_key),
                "pool_size": obj.pool_size,
                "n_children_spawned": obj.n_children_spawned,
            }
            return {"t": "seedseq", "id": n, "fields": self(fields, path)}
        if isinstance(obj, torch.Generator):
            n = self._remember(obj)
            return {"t": "torchgen", "id": n, "device": str(obj.device), "state": obj.get_state()}
        if isinstance(obj, (torch.dtype, torch.device)):
            return {"t": "torchattr", "kind": type(obj).__name__, "v": str(obj)}
        if isinstance(obj, PurePath):
            return {"t": "path", "v": str(obj)}
        if isinstance(obj, enum.Enum):
            return {"t": "enum", "cls": self._state_class(type(obj), path), "v": self(obj.value, path)}
        if isinstance(obj, nn.Module):
            return self._module(obj, path)
        if isinstance(obj, torch.optim.Optimizer):
            return self._optimizer(obj, path)
        if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
            n = self._remember(obj)
            return {"t": "tuple", "id": n, "items": [self(v, f"{path}[{i}]") for i, v in enumerate(obj)]}
        if isinstance(obj, list):
            n = self._remember(obj)
            return {"t": "list", "id": n, "items": [self(v, f"{path}[{i}]") for i, v in enumerate(obj)]}
        if isinstance(obj, collections.deque):
            n = self._remember(obj)
            items = [self(v, f"{path}[{i}]") for i, v in enumerate(obj)]
            return {"t": "deque", "id": n, "items": items, "maxlen": obj.maxlen}
        if isinstance(obj, (set, frozenset)):
            n = self._remember(obj)
            items = [self(v, f"{path}{{}}") for v in sorted(obj, key=repr)]
            return {"t": "frozenset" if isinstance(obj, frozenset) else "set", "id": n, "items": items}
        if isinstance(obj, dict):
            if type(obj) not in (dict, collections.OrderedDict, collections.defaultdict):
                raise SnapshotError(f"{path}: dict subclass {type(obj).__name__} cannot be snapshotted")
            factory = getattr(obj, "default_factory", None)
            if factory not in (None, list, dict, int):
                raise SnapshotError(f"{path}: defaultdict with factory {factory!r}")
            n = self._remember(obj)
            items = [[self(k, f"{path}.key"), self(v, f"{path}[{k!r}]")] for k, v in obj.items()]
            kinds: dict[type, str] = {dict: "dict", collections.OrderedDict: "odict"}
            kind = kinds.get(type(obj), "ddict")
            node: dict[str, Any] = {"t": kind, "id": n, "items": items}
            if kind == "ddict":
                node["factory"] = factory.__name__ if factory else ""
            return node
        return self._object(obj, path)

    def _tensor(self, t: torch.Tensor, path: str) -> dict[str, Any]:
        if t.grad_fn is not None:
            raise SnapshotError(
                f"{path}: tensor still carries an autograd graph ({type(t.grad_fn).__name__}); "
                "state kept between calls must be plain tensors"
            )
        n = self._remember(t)
        node: dict[str, Any] = {
            "t": "tensor",
            "id": n,
            "data": t.detach().cpu(),
            "device": str(t.device),
            "requires_grad": bool(t.requires_grad),
            "param": isinstance(t, nn.Parameter),
        }
        if t.grad is not None:
            node["grad"] = t.grad.detach().cpu()
        return node

    def _module(self, m: nn.Module, path: str) -> dict[str, Any]:
        n = self._remember(m)
        params = {k: self(v, f"{path}.{k}") for k, v in m.named_parameters(remove_duplicate=False)}
        buffers = {k: self(v, f"{path}.{k}") for k, v in m.named_buffers(remove_duplicate=False)}
        return {"t": "module", "id": n, "cls": _class_path(type(m)), "training": m.training,
                "params": params, "buffers": buffers}  # fmt: skip

    def _state_class(self, cls: type, path: str) -> str:
        name = _class_path(cls)
        if self.allowed.get(name) is not cls:
            raise SnapshotError(
                f"{path}: {name} is not a state class, so a checkpoint could not recreate it; declare it in "
                "the method's AlgorithmSpec.state_classes, or keep plain data there instead (numbers, "
                "strings, lists, dicts, tensors, numpy arrays)"
            )
        return name

    def _optimizer(self, opt: torch.optim.Optimizer, path: str) -> dict[str, Any]:
        if type(opt) not in OPTIMIZERS:
            names = ", ".join(c.__name__ for c in OPTIMIZERS)
            raise SnapshotError(f"{path}: optimizer {_class_path(type(opt))} is not one of {names}")
        n = self._remember(opt)
        groups = []
        for gi, g in enumerate(opt.param_groups):
            hyper = {k: self(v, f"{path}.group{gi}.{k}") for k, v in g.items() if k != "params"}
            params = [self(p, f"{path}.group{gi}.params[{i}]") for i, p in enumerate(g["params"])]
            groups.append({"hyper": hyper, "params": params})
        flat = [p for g in opt.param_groups for p in g["params"]]
        state = [self(dict(opt.state[p]), f"{path}.state[{i}]") if p in opt.state else None
                 for i, p in enumerate(flat)]  # fmt: skip
        return {"t": "optim", "id": n, "cls": _class_path(type(opt)), "groups": groups, "state": state}

    def _object(self, obj: Any, path: str) -> dict[str, Any]:
        cls = type(obj)
        name = self._state_class(cls, path)
        n = self._remember(obj)
        attrs = dict(vars(obj)) if hasattr(obj, "__dict__") else {}
        for slot in getattr(cls, "__slots__", ()):
            if hasattr(obj, slot):
                attrs[slot] = getattr(obj, slot)
        values = {k: self(v, f"{path}.{k}") for k, v in attrs.items()}
        return {"t": "obj", "id": n, "cls": name, "attrs": values}


def capture(
    obj: Any,
    externals: dict[str, Any] | None = None,
    allowed: dict[str, type] | None = None,
    root: str = "state",
) -> Any:
    """A weights-only-safe tree of ``obj`` (see the module docstring); ``externals`` are stored by name.

    ``allowed``: the state classes (default :func:`state_classes`); an object of any other class is refused.
    ``root``: what ``obj`` is, as an error names the path to a refused object (``policy.buffer[3]``).
    """
    ext = {id(v): k for k, v in (externals or {}).items()}
    return _Capture(ext, state_classes() if allowed is None else allowed)(obj, root)


class _Rebuild:
    def __init__(self, externals: dict[str, Any], allowed: dict[str, type]) -> None:
        self.externals = externals
        self.allowed = allowed
        self.optimizers = {_class_path(c): c for c in OPTIMIZERS}
        self.memo: dict[int, Any] = {}

    def __call__(self, node: Any, path: str, target: Any = None) -> Any:
        if not isinstance(node, dict):
            return node
        kind = node.get("t")
        if kind == "bigint":
            return int(node["v"])
        if kind == "ext":
            name = node["name"]
            if name not in self.externals:
                raise SnapshotError(f"{path}: external {name!r} was not supplied")
            return self.externals[name]
        if kind == "ref":
            return self.memo[node["id"]]
        if kind == "keep":
            if target is None:
                what = node["what"]
                raise SnapshotError(
                    f"{path}: the checkpoint held a function here ({what}). Functions are never stored: a "
                    "resumed run keeps the one its fresh build made at this place, and the fresh build made "
                    "none (a function set after construction, in a call). Keep data there instead (a name, a "
                    "number) and choose the function from it when it is needed"
                )
            return target
        if kind == "tensor":
            return self._tensor(node, target)
        if kind == "ndarray":
            arr = node["data"].numpy().copy()
            self.memo[node["id"]] = arr
            return arr
        if kind == "npscalar":
            dtype = np.dtype(node["dtype"])
            if dtype.kind not in _NUMPY_SCALAR_KINDS:
                raise SnapshotError(f"{path}: numpy scalar of dtype {dtype} is not plain data")
            return dtype.type(node["v"])
        if kind == "npgen":
            state = self(node["state"], path)
            bit_generator = BIT_GENERATORS.get(state.get("bit_generator"))
            if bit_generator is None:
                raise SnapshotError(f"{path}: unknown numpy bit generator {state.get('bit_generator')!r}")
            gen = np.random.Generator(bit_generator())
            gen.bit_generator.state = state
            self.memo[node["id"]] = gen
            return gen
        if kind == "seedseq":
            f = self(node["fields"], path)
            seq = np.random.SeedSequence(
                f["entropy"],
                spawn_key=tuple(f["spawn_key"]),
                pool_size=f["pool_size"],
                n_children_spawned=f["n_children_spawned"],
            )
            self.memo[node["id"]] = seq
            return seq
        if kind == "torchgen":
            torch_gen = torch.Generator(device=node["device"])
            torch_gen.set_state(node["state"])
            self.memo[node["id"]] = torch_gen
            return torch_gen
        if kind == "torchattr":
            return getattr(torch, node["kind"])(node["v"]) if node["kind"] == "device" else _dtype(node["v"])
        if kind == "path":
            return Path(node["v"])
        if kind == "enum":
            cls = _require_class(self.allowed, node["cls"], path)
            if not issubclass(cls, enum.Enum):
                raise SnapshotError(f"{path}: {node['cls']} is not an enum")
            return cls(self(node["v"], path))
        if kind in ("list", "deque", "set", "frozenset", "tuple"):
            return self._sequence(node, path, target)
        if kind in ("dict", "odict", "ddict"):
            return self._dict(node, path, target)
        if kind == "module":
            return self._module(node, path, target)
        if kind == "optim":
            return self._optimizer(node, path)
        if kind == "obj":
            return self._object(node, path, target)
        raise SnapshotError(f"{path}: unknown snapshot node {kind!r}")

    def _tensor(self, node: dict[str, Any], target: Any) -> torch.Tensor:
        data = node["data"].to(node["device"])
        if node["param"]:
            t: torch.Tensor = nn.Parameter(data, requires_grad=node["requires_grad"])
        else:
            t = data.requires_grad_(node["requires_grad"]) if data.is_floating_point() else data
        if "grad" in node:
            t.grad = node["grad"].to(node["device"])
        self.memo[node["id"]] = t
        return t

    def _sequence(self, node: dict[str, Any], path: str, target: Any) -> Any:
        kind = node["t"]
        if kind == "tuple":  # immutable: items first (a tuple cannot be on a cycle through itself)
            out: Any = tuple(self(v, f"{path}[{i}]") for i, v in enumerate(node["items"]))
            self.memo[node["id"]] = out
            return out
        olds = list(target) if isinstance(target, (list, collections.deque)) else []
        if kind == "list":
            out = []
        elif kind == "deque":
            out = collections.deque(maxlen=node["maxlen"])
        else:
            out = set()
        self.memo[node["id"]] = out
        for i, v in enumerate(node["items"]):
            value = self(v, f"{path}[{i}]", olds[i] if i < len(olds) else None)
            out.add(value) if isinstance(out, set) else out.append(value)
        if kind == "frozenset":
            out = frozenset(out)
            self.memo[node["id"]] = out
        return out

    def _dict(self, node: dict[str, Any], path: str, target: Any) -> dict[Any, Any]:
        kind = node["t"]
        if kind == "odict":
            out: dict[Any, Any] = collections.OrderedDict()
        elif kind == "ddict":
            factory = {"list": list, "dict": dict, "int": int}.get(node["factory"])
            out = collections.defaultdict(factory)
        else:
            out = {}
        self.memo[node["id"]] = out
        old = target if isinstance(target, dict) else {}
        for k_node, v_node in node["items"]:
            key = self(k_node, f"{path}.key")
            out[key] = self(v_node, f"{path}[{key!r}]", old.get(key) if _hashable(key) else None)
        return out

    def _module(self, node: dict[str, Any], path: str, target: Any) -> nn.Module:
        if not isinstance(target, nn.Module) or _class_path(type(target)) != node["cls"]:
            raise SnapshotError(
                f"{path}: a module ({node['cls']}) can only be restored into the same module of a fresh build"
            )
        self.memo[node["id"]] = target
        target.train(node["training"])
        for kind, nodes in (("_parameters", node["params"]), ("_buffers", node["buffers"])):
            for name, sub in nodes.items():
                owner_name, _, leaf = name.rpartition(".")
                owner = target.get_submodule(owner_name) if owner_name else target
                current = getattr(owner, kind)[leaf]
                value = self(sub, f"{path}.{name}")
                if value is current:
                    continue
                if sub.get("t") == "tensor" and current is not None and current.shape == value.shape:
                    with torch.no_grad():  # first sight: copy into the fresh module's own tensor
                        current.copy_(value)
                    if current.is_floating_point():
                        current.requires_grad_(value.requires_grad)
                    current.grad = value.grad
                    self.memo[sub["id"]] = current
                else:  # already rebuilt elsewhere (an optimizer holds it): the module adopts that tensor
                    getattr(owner, kind)[leaf] = value
        return target

    def _optimizer(self, node: dict[str, Any], path: str) -> torch.optim.Optimizer:
        cls = _require_class(self.optimizers, node["cls"], path)
        groups = []
        for gi, g in enumerate(node["groups"]):
            params = [self(p, f"{path}.group{gi}.params") for p in g["params"]]
            groups.append({"params": params, **{k: self(v, path) for k, v in g["hyper"].items()}})
        opt = cls(groups)
        flat = [p for g in opt.param_groups for p in g["params"]]
        for p, st in zip(flat, node["state"], strict=True):
            if st is not None:
                opt.state[p] = self(st, f"{path}.state")
        self.memo[node["id"]] = opt
        return opt

    def _object(self, node: dict[str, Any], path: str, target: Any) -> Any:
        cls = _require_class(self.allowed, node["cls"], path)
        if issubclass(cls, enum.Enum):
            raise SnapshotError(f"{path}: enum {node['cls']} can only be restored from its value")
        obj = target if type(target) is cls else object.__new__(cls)
        self.memo[node["id"]] = obj
        old = dict(vars(obj)) if hasattr(obj, "__dict__") else {}
        _check_fields(node["attrs"], node["cls"], path)
        for k, v in node["attrs"].items():
            current = old.get(k, getattr(obj, k, None) if not hasattr(obj, "__dict__") else None)
            object.__setattr__(obj, k, self(v, f"{path}.{k}", current))
        return obj


def _hashable(key: Any) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True


def _dtype(name: str) -> torch.dtype:
    value = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(value, torch.dtype):
        raise SnapshotError(f"unknown torch dtype {name!r}")
    return value


def rebuild(
    tree: Any,
    externals: dict[str, Any] | None = None,
    target: Any = None,
    allowed: dict[str, type] | None = None,
) -> Any:
    """Objects from a :func:`capture` tree; with ``target``, restore into that object where types match.

    ``allowed``: the state classes (default :func:`state_classes`); a tree naming any other class, or one
    that is not a well-formed snapshot, raises :class:`SnapshotError`.
    """
    allowed = state_classes() if allowed is None else allowed
    try:
        return _Rebuild(dict(externals or {}), allowed)(tree, "state", target)
    except SnapshotError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, RuntimeError) as err:
        raise SnapshotError(f"not a well-formed snapshot ({type(err).__name__}: {err})") from err


def save_tree(tree: Any, path: str | Path) -> None:
    """Write a tree atomically: a new file, then renamed over ``path``.

    A crash never leaves half a checkpoint, and a link at ``path`` is replaced, not written through
    (:mod:`raysfl.safe_write`).
    """
    replace_file(Path(path), lambda tmp: torch.save(tree, tmp))


def load_tree(path: str | Path) -> Any:
    """Read a tree with ``torch.load(weights_only=True)``: tensors and plain data only, no code."""
    return torch.load(Path(path), map_location="cpu", weights_only=True)
