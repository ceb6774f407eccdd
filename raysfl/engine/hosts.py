"""Hosts: the process-local homes of method logic, used in-process and inside the Ray actors alike.

:class:`ClientHost` keeps the client logic and the state of every virtual client assigned to it (created
lazily on first use, so an idle registered client costs nothing until it is selected);
:class:`ServerHost` keeps the server logic. Both expose one ``call(method, ...)`` entry point; the actor
shells in ``actors/`` forward to it unchanged, so local and Ray runs execute the same code.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from raysfl import profiling
from raysfl.algorithms.base import AlgorithmSpec, RunSetup
from raysfl.api import ClientLogic, ServerLogic, check_logic
from raysfl.config import ConfigError, option_meta
from raysfl.engine import float_mode
from raysfl.engine.config import EngineConfig
from raysfl.engine.policy_errors import PolicyError
from raysfl.engine.rng import seed_sequence, torch_seed
from raysfl.engine.snapshot import capture, rebuild
from raysfl.methods import resolve
from raysfl.models.zoo import build_split_model


def build_model(setup: RunSetup) -> Any:
    """The scenario's split model with the run's initial weights (identical in every process).

    With ``engine.memory_format = "channels_last"`` the conv weights of every part are stored channels-last,
    so each convolution returns channels-last feature maps and runs oneDNN's channels-last kernels (same
    values up to float rounding). Ray ships tensors with their strides, so every process sees the layouts
    the in-process run sees. With ``engine.precision = "bfloat16"`` every layer with parameters runs under
    bfloat16 autocast and hands float32 on (:mod:`raysfl.models.precision`).
    """
    sc = setup.scenario
    c, h, _ = setup.input_shape
    model = build_split_model(sc.model, c, h, setup.num_classes, seed=torch_seed(sc.seed, "model"))
    return model.use_memory_format(sc.engine.memory_format).use_precision(sc.engine.precision)


@contextmanager
def paced(wall_s: float) -> Iterator[None]:
    """Throttle: make the enclosed operation last at least ``wall_s`` wall seconds (realtime mode).

    The device's emulated duration of an operation (compute at f_k, transfer at R_k) divided by the
    time scale; a host faster than the emulated device sleeps the difference.
    """
    start = time.monotonic()
    yield
    left = wall_s - (time.monotonic() - start)
    if left > 0:
        time.sleep(left)


def _use_threads(threads: int) -> None:
    """Run torch ops with exactly ``threads`` threads.

    CPU results can depend on the thread count, so each role (pool, server) uses a fixed one, in-process
    as in its own actor.
    """
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@contextmanager
def _computing(threads: int, flush_denormal: bool) -> Iterator[None]:
    """A host call's torch work: ``threads`` threads; subnormals flushed if ``engine.flush_denormal``."""
    _use_threads(threads)
    with float_mode.flushed(flush_denormal):
        yield


def _start_workers(threads: int, flush_denormal: bool) -> None:
    """Start torch's worker threads with IEEE arithmetic before any flushed call (:mod:`float_mode`)."""
    if flush_denormal and threads > 1:
        float_mode.start_workers(threads)


_DEVICE_FIELD = next(f for f in dataclasses.fields(EngineConfig) if f.name == "server_device")
SERVER_DEVICES: tuple[str, ...] = option_meta(_DEVICE_FIELD).choices or ()
"""The values ``engine.server_device`` allows."""


class ServerDeviceError(ConfigError):
    """``engine.server_device`` asks for a device the server's process does not have (a user error: exit 2).

    A :class:`~raysfl.config.ConfigError`, so the command line prints it as one paragraph naming the option;
    it pickles with its problems, so a Ray worker's error reaches the driver as this type.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        """Rebuild from the problems (not the joined message, as the base class would), keeping the notes."""
        return type(self), (self.problems, self.source, self.kind), dict(self.__dict__)


def pick_device(requested: str) -> str:
    """``cuda`` when asked for or (``auto``) when this process sees a GPU, else ``cpu``.

    Raises:
        ServerDeviceError: ``requested`` is ``"cuda"`` and torch sees no usable GPU here, or is not one of
            :data:`SERVER_DEVICES`.
    """
    if requested not in SERVER_DEVICES:
        allowed = ", ".join(repr(d) for d in SERVER_DEVICES)
        raise ServerDeviceError(
            [f"engine.server_device: {requested!r} is not allowed; choose one of {allowed}"]
        )
    if requested == "cuda" and not torch.cuda.is_available():
        raise ServerDeviceError(
            [
                "engine.server_device: 'cuda' needs a GPU, but the server's process sees none (torch.cuda."
                "is_available() is false); choose 'auto' (the GPU where there is one, else the CPU) or 'cpu'"
            ]
        )
    if requested in ("cuda", "auto") and torch.cuda.is_available():
        return "cuda"
    return "cpu"


def deterministic_cuda() -> None:
    """Make this process's CUDA kernels deterministic: same scenario + seed => same metrics on a GPU too.

    cuDNN's autotuner (``benchmark``) and its non-deterministic algorithms (atomics in a convolution's
    weight-gradient pass) would make two runs of one scenario, or a run and its resumption from a checkpoint,
    differ in the last bits and then diverge. cuBLAS needs a fixed workspace for deterministic reductions,
    set here before its first handle is created (``setdefault``: a user's own setting wins). An op with no
    deterministic kernel warns instead of failing; uninitialised memory is not filled (that is a debugging
    aid and costs a pass over every ``torch.empty``). Called by :class:`ServerHost` on a CUDA device; TF32
    stays as torch defaults it (convolutions in TF32, float32 matmuls in full float32).
    """
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = False  # type: ignore[attr-defined]  # set at import


def _writable(a: Any) -> Any:
    return np.array(a) if isinstance(a, np.ndarray) and not a.flags.writeable else a


def owned_setup(setup: RunSetup) -> RunSetup:
    """``setup`` with writable arrays (the same object when they already are).

    An actor receives numpy arrays as read-only views into Ray's object store; torch tensors over them
    make torch print a ``UserWarning`` into the user's terminal, and writing them is undefined. The setup's
    arrays (sample indices, label counts) are small and copied once, when a host starts.
    """
    hist, indices = _writable(setup.label_hist), tuple(_writable(ix) for ix in setup.client_indices)
    if hist is setup.label_hist and all(a is b for a, b in zip(indices, setup.client_indices, strict=True)):
        return setup
    return dataclasses.replace(setup, label_hist=hist, client_indices=indices)


def _method(logic: Any, name: str, role: str) -> Any:
    """The bound method ``name`` of ``logic`` (the ``role`` logic), or an error naming what the policy asked.

    Raises:
        PolicyError: ``logic`` has no public method ``name``.
    """
    found = None if name.startswith("_") else getattr(logic, name, None)
    if not callable(found):
        target = role.upper()
        raise PolicyError(
            f"the policy's Call({target}, {name}) runs {name!r} on the {role} logic "
            f"{type(logic).__qualname__}, which has no such method (Call({target}, ...) runs a method of the "
            f"{role} logic)"
        )
    return found


class ClientHost:
    """Hosts the client logic and the per-client state of a set of virtual clients."""

    def __init__(
        self, setup: RunSetup, train_x: np.ndarray, train_y: np.ndarray, transform: Any, threads: int = 1
    ) -> None:
        self.threads = threads
        self.flush_denormal = setup.scenario.engine.flush_denormal
        _start_workers(threads, self.flush_denormal)
        _use_threads(threads)
        setup = owned_setup(setup)
        self.setup = setup
        spec = setup_spec(setup)
        assert spec.make_client is not None  # check_spec refuses a spec without one
        logic = spec.make_client(setup, build_model(setup), train_x, train_y, transform)
        self.logic: ClientLogic = check_logic(logic, ClientLogic, spec)
        self.states: dict[int, Any] = {}
        self._externals = {"setup": setup, "train_x": train_x, "train_y": train_y, "transform": transform}

    def _fresh_state(self, client: int) -> Any:
        """A new state of ``client`` from the client's own seed stream."""
        seq = seed_sequence(self.setup.scenario.seed, "client", client)
        return self.logic.init_state(client, self.setup.client_indices[client], seq)

    def state(self, client: int) -> Any:
        """The state of ``client``, created on first use from the client's own seed stream."""
        st = self.states.get(client)
        if st is None:
            st = self.states[client] = self._fresh_state(client)
        return st

    def call(self, method: str, client: int, *args: Any, pace_wall_s: float = 0.0) -> Any:
        """Run ``logic.method(state_of(client), *args)``; with ``pace_wall_s`` take at least that long."""
        with (
            _computing(self.threads, self.flush_denormal),
            profiling.section("client." + method),
            paced(pace_wall_s),
        ):
            return _method(self.logic, method, "client")(self.state(client), *args)

    def clients_roam(self) -> bool:
        """Whether every call of the logic is a whole job, so a client's state may wait outside the pool.

        A client logic says so with ``clients_roam = True`` (:mod:`raysfl.engine.balance`).
        """
        return bool(getattr(self.logic, "clients_roam", False))

    def call_carried(
        self, method: str, client: int, tree: Any, *args: Any, pace_wall_s: float = 0.0
    ) -> tuple[Any, Any]:
        """:meth:`call` for a client whose state travels with its calls: ``(result, state)``.

        ``tree`` is the state the client's previous call returned (a :func:`capture` tree), or ``None``
        for the client's first call (a fresh state from its seed stream). Nothing of the client stays in
        this host.
        """
        st = self._fresh_state(client) if tree is None else rebuild(tree, self._externals)
        with (
            _computing(self.threads, self.flush_denormal),
            profiling.section("client." + method),
            paced(pace_wall_s),
        ):
            value = _method(self.logic, method, "client")(st, *args)
        with profiling.section("client.carry_state"):
            return value, capture(st, self._externals, root=f"client_state[{client}]")

    def snapshot(self) -> dict[str, Any]:
        """The pool's logic, every client state created so far (one tree each) and the torch RNG state."""
        ext = self._externals
        return {
            "logic": capture(self.logic, ext, root="client_logic"),
            "states": {c: capture(st, ext, root=f"client_state[{c}]") for c, st in self.states.items()},
            "torch_rng": torch.get_rng_state(),
        }

    def restore(self, snap: dict[str, Any], logic: bool = True) -> None:
        """Inverse of :meth:`snapshot` (``snap["states"]`` may hold any subset of the clients)."""
        ext = self._externals
        if logic:
            self.logic = rebuild(snap["logic"], ext, target=self.logic)
            torch.set_rng_state(snap["torch_rng"])
        self.states = {int(c): rebuild(tree, ext) for c, tree in snap["states"].items()}


class ServerHost:
    """Hosts the server logic."""

    def __init__(
        self,
        setup: RunSetup,
        test_x: np.ndarray,
        test_y: np.ndarray,
        transform: Any,
        device: str = "cpu",
        threads: int = 1,
    ) -> None:
        self.threads = threads
        self.device = str(device)
        self.flush_denormal = setup.scenario.engine.flush_denormal
        _start_workers(threads, self.flush_denormal)
        _use_threads(threads)
        if torch.device(device).type == "cuda":
            deterministic_cuda()  # before the first CUDA op of this host
        setup = owned_setup(setup)
        # Arrays from Ray's object store are read-only and torch wants tensors it may write: copy once
        # here (the test set, at start-up), which also keeps torch's warning out of the user's terminal.
        # The transformed test set goes to the server's device once, so evaluations copy nothing.
        x = transform.test(torch.from_numpy(np.array(test_x, copy=True))).to(device)
        y = torch.from_numpy(np.array(test_y, dtype=np.int64, copy=True)).to(device)
        seed = torch_seed(setup.scenario.seed, "server")
        spec = setup_spec(setup)
        assert spec.make_server is not None  # check_spec refuses a spec without one
        self.logic: ServerLogic = check_logic(
            spec.make_server(setup, build_model(setup), x, y, seed, device), ServerLogic, spec
        )
        self._externals = {"setup": setup, "test_x": x, "test_y": y, "transform": transform}
        # Random layers of the server model (dropout) draw from the process-global generator: start it from
        # the scenario's seed, so the server draws the same masks in-process as in its own actor, whatever
        # ran in the process before (the clients' draws leave it untouched: algorithms.common.own_rng).
        torch.manual_seed(torch_seed(setup.scenario.seed, "server", "global"))

    def device_name(self) -> str:
        """The server device's name: the GPU's model on CUDA, else the device string (``cpu``)."""
        dev = torch.device(self.device)
        return torch.cuda.get_device_name(dev) if dev.type == "cuda" else self.device

    def call(self, method: str, *args: Any, pace_wall_s: float = 0.0) -> Any:
        """Run ``logic.method(*args)``; with ``pace_wall_s`` take at least that long (realtime mode)."""
        with (
            _computing(self.threads, self.flush_denormal),
            profiling.section("server." + method),
            paced(pace_wall_s),
        ):
            return _method(self.logic, method, "server")(*args)

    def snapshot(self) -> dict[str, Any]:
        """The server logic (models, optimizer, buffers, statistics) and the torch RNG state."""
        snap = {
            "logic": capture(self.logic, self._externals, root="server_logic"),
            "torch_rng": torch.get_rng_state(),
        }
        if torch.cuda.is_available():
            snap["cuda_rng"] = torch.cuda.get_rng_state_all()
        return snap

    def restore(self, snap: dict[str, Any]) -> None:
        """Inverse of :meth:`snapshot`."""
        self.logic = rebuild(snap["logic"], self._externals, target=self.logic)
        torch.set_rng_state(snap["torch_rng"])
        if "cuda_rng" in snap and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(snap["cuda_rng"])


def profile_control(action: str, lane: str = "") -> dict[str, Any] | None:
    """A worker's side of profiling (:mod:`raysfl.profiling`), called by the actor shells.

    ``"start"`` profiles this process as ``lane``; ``"report"`` returns what it measured so far (``None``
    when it does not profile).
    """
    if action == "start":
        profiling.enable(lane)
        return None
    if action == "report":
        prof = profiling.ACTIVE
        return None if prof is None else prof.report()
    raise ValueError(f"unknown profile action {action!r}; choose 'start' or 'report'")


def setup_spec(setup: RunSetup) -> AlgorithmSpec:
    """The :class:`AlgorithmSpec` of the setup's algorithm (a method outside raysfl is imported here too)."""
    return resolve(setup.scenario.algorithm.name)
