"""A GPU-ready server, checked without a GPU: the GAS server run on torch's ``meta`` device.

A meta tensor has a device but no data, so every read of device data on the hot path fails loudly
(``.item()``, ``float()``, ``int()``, ``bool()``, boolean-mask indexing, ``unique``), and so does every op
that mixes a device tensor with a CPU tensor that was never moved (only 0-dim CPU scalars may mix). The
server's calls must pass anyway: their decisions are taken on CPU-side copies, and the only device reads
allowed are the gradient each call returns (``.cpu()``, counted) and the success flag of a new Cholesky
factorisation (counted; with the low-rank sampler, one per fold), and no host-to-device copy may wait for
the device (counted: a ``.to`` without ``non_blocking``). Afterwards every tensor the server holds is on its
device, except the few host-side values it keeps there on purpose. ``tests/gpu`` checks all of this, and
every other method's server, on a real GPU.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

from raysfl.algorithms.gas.server import GASServer
from raysfl.algorithms.lightweight_fedsl.dropout import dropout_mask, gather, restore
from raysfl.engine.hosts import ServerHost, build_model
from raysfl.engine.runner import prepare
from raysfl.scenario import scenario_from_dict

META = torch.device("meta")


def tiny(params: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "gas-device",
        "seed": 11,
        "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 200, "synthetic_test": 20},
        "model": {"name": "lenet5"},
        "federation": {"num_clients": 4, "active_clients": 2},
        "train": {"global_iterations": 1, "local_iterations": 3, "batch_size": 8, "clip_grad_norm": 10.0},
        "algorithm": {"name": "gas", "params": {"q_s": 2, "q_c": 2, **params}},
        "metrics": {"progress": False, "tensorboard": False},
    }


class DeviceReads:
    """Counts the device reads the server is allowed: gradient copies to the host and Cholesky flags.

    Also counts host-to-device ``.to`` copies made without ``non_blocking``: on a GPU each waits for the
    device (``common/device.py: to_device``), so the hot path makes none.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.host_copies = 0
        self.factorisations = 0
        self.blocking_copies = 0
        cpu, cholesky_ex, to = torch.Tensor.cpu, torch.linalg.cholesky_ex, torch.Tensor.to

        def counted_to(t: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            parsed = {k: v for k, v in kwargs.items() if k != "copy"}
            device, _, non_blocking, _ = torch._C._nn._parse_to(*args, **parsed)
            if device == META and t.device.type == "cpu" and not non_blocking:
                self.blocking_copies += 1
            return to(t, *args, **kwargs)

        def counted_cpu(t: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            if t.device == META:
                self.host_copies += 1
                return torch.zeros(t.shape, dtype=t.dtype)
            return cpu(t, *args, **kwargs)

        def counted_cholesky(a: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if a.device == META:  # L on the device, the flag read on the host (always 0: positive definite)
                self.factorisations += 1
                return a.clone(), torch.zeros((), dtype=torch.int32)
            return cholesky_ex(a, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, "cpu", counted_cpu)
        monkeypatch.setattr(torch.Tensor, "to", counted_to)
        monkeypatch.setattr(torch.linalg, "cholesky_ex", counted_cholesky)


def held_tensors(obj: Any, path: str = "server", seen: set[int] | None = None) -> Iterator[tuple[str, Any]]:
    """Every tensor reachable from ``obj``'s attributes, containers, modules and optimizers, with a path."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, torch.nn.Module):
        for name, t in [*obj.named_parameters(), *obj.named_buffers()]:
            yield f"{path}.{name}", t
    elif isinstance(obj, torch.optim.Optimizer):
        for i, st in enumerate(obj.state.values()):
            yield from held_tensors(st, f"{path}.state[{i}]", seen)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from held_tensors(v, f"{path}[{k!r}]", seen)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from held_tensors(v, f"{path}[{i}]", seen)
    elif hasattr(obj, "__dict__") and type(obj).__module__.startswith("raysfl.algorithms"):
        for k, v in vars(obj).items():
            yield from held_tensors(v, f"{path}.{k}", seen)


# Host-side on purpose: w_c (sent to the pools), the per-arrival weights and CPU labels in the buffer, the
# statistics' weights S_y and version counters (M numbers each), the dissimilarity meter's control rows.
HOST_SIDE = (
    "server.global_client",
    "server.stats.weight",
    "server.stats.version",
    "server.dissimilarity.pool",
)


def _host_side(path: str) -> bool:
    if path.startswith(HOST_SIDE):
        return True
    return path.startswith("server.buffer[") and path.endswith(("[2]", "[3]"))


@pytest.fixture(scope="module")
def batches() -> list[tuple[int, tuple[torch.Tensor, torch.Tensor]]]:
    """Real activations of the tiny model, as pools send them (CPU float32, int64 labels)."""
    prep = prepare(scenario_from_dict(tiny({})))
    model = build_model(prep.setup)
    gen = torch.Generator().manual_seed(0)
    out = []
    for i in range(8):
        x = torch.randn(8, *prep.setup.input_shape, generator=gen)
        y = (torch.arange(8) * (i + 1)) % prep.setup.num_classes  # uneven counts: "equal" generates
        with torch.no_grad():
            out.append((i % 4, (model.client(x), y)))
    return out


@pytest.mark.parametrize(
    "params",
    [
        {"covariance": "full", "stats_update": "per-flush", "generation": "top-up"},
        {"covariance": "full", "stats_update": "per-activation", "generation": "equal"},
        {"covariance": "diagonal", "server_update": "before-gradient"},
        {"covariance": "full", "stats_update": "per-flush", "sampler": "low-rank", "low_rank_rows": 4},
        {"covariance": "diagonal", "dissimilarity_every": 1, "dissimilarity_samples": 4},
    ],
    ids=["full-per-flush", "full-per-activation", "diagonal", "low-rank", "dissimilarity"],
)
def test_gas_server_runs_on_a_device_reading_back_only_the_gradients(monkeypatch, batches, params):
    prep = prepare(scenario_from_dict(tiny(params)))
    ds = prep.dataset
    host = ServerHost(prep.setup, ds.test_x, ds.test_y, prep.transform, device="meta", threads=1)
    server = host.logic
    assert isinstance(server, GASServer) and server.device == META
    assert server.test_x.device == META and server.test_y.device == META  # the test set: moved once
    reads = DeviceReads(monkeypatch)
    for n, (client, batch) in enumerate(batches, start=1):
        grads = server.on_activations(client, batch, 0, 1 + n // 4)
        assert grads.device.type == "cpu" and grads.shape == batch[0].shape
        assert reads.host_copies == n  # one host copy per call: the gradient
        assert reads.blocking_copies == 0  # and no host-to-device copy that waits for the device
    assert server.server_updates == len(batches) // 2 and server.generated_total > 0
    if params["covariance"] == "full":
        assert 0 < reads.factorisations <= server.server_updates * prep.setup.num_classes
        if params.get("sampler") == "low-rank":
            assert reads.factorisations == server.sampler.folds
    else:
        assert reads.factorisations == 0
    misplaced = [
        (path, t.device) for path, t in held_tensors(server) if (t.device != META) != _host_side(path)
    ]
    assert not misplaced, f"tensors on the wrong side: {misplaced}"


def test_the_cpu_generator_is_the_one_of_before():
    """On the CPU the server's generator draws what ``torch.Generator().manual_seed(seed)`` drew."""
    from raysfl.algorithms.common.device import device_generator

    a = torch.randn(5, generator=device_generator("cpu", 123))
    b = torch.randn(5, generator=torch.Generator().manual_seed(123))
    assert torch.equal(a, b)


@pytest.mark.parametrize("granularity", ["element", "channel"])
def test_dropout_restore_and_gather_use_host_positions_with_the_mask_results(granularity):
    mask = dropout_mask(3, 1, 2, (4, 3, 5, 5), 0.3, granularity)
    keep = torch.from_numpy(mask)
    full = torch.randn(4, 3, 5, 5, generator=torch.Generator().manual_seed(1))
    values = full[keep]
    assert torch.equal(gather(full, mask), values)
    expected = torch.zeros_like(full)
    expected[keep] = values
    assert torch.equal(restore(values, mask), expected)
    # on a device: nothing is read back (a boolean mask on the device would need its count)
    assert restore(values.to(META), mask).device == META
    assert gather(full.to(META), mask).shape == values.shape
    assert int(np.count_nonzero(mask)) == len(values)


def _lenet_client() -> torch.nn.Module:
    prep = prepare(scenario_from_dict(tiny({})))
    return build_model(prep.setup).client


def test_load_into_loads_like_load_state_dict_and_checks_keys_and_shapes():
    from raysfl.algorithms.common.device import load_into

    source, target, reference = _lenet_client(), _lenet_client(), _lenet_client()
    with torch.no_grad():
        for p in source.parameters():
            p.add_(1.5)
    state = {k: v.clone() for k, v in source.state_dict().items()}
    load_into(target, state)
    reference.load_state_dict(state)
    for (k, a), b in zip(target.state_dict().items(), reference.state_dict().values(), strict=True):
        assert torch.equal(a, b) and torch.equal(a, state[k]), k
    assert all(p.requires_grad for p in target.parameters())  # parameters stay parameters, in place
    key = next(iter(state))
    with pytest.raises(RuntimeError, match=f"missing \\['{key}'\\]"):
        load_into(target, {k: v for k, v in state.items() if k != key})
    with pytest.raises(RuntimeError, match="unexpected \\['extra'\\]"):
        load_into(target, {**state, "extra": torch.zeros(1)})
    load_into(target, {key: state[key] * 0, "extra": torch.zeros(1)}, strict=False)  # the rest kept
    assert torch.equal(target.state_dict()[key], state[key] * 0)
    with pytest.raises(RuntimeError, match=f"state\\['{key}'\\] has shape"):
        load_into(target, {key: torch.zeros(3)}, strict=False)


def test_to_device_moves_to_the_device_and_copies_on_the_cpu_only_when_asked():
    from raysfl.algorithms.common.device import to_device

    t = torch.arange(6.0)
    assert to_device(t, "cpu") is t
    copied = to_device(t, "cpu", copy=True)
    assert copied is not t and torch.equal(copied, t)
    assert to_device(t, META).device == META


def test_the_local_backend_reports_the_server_device():
    from raysfl.engine.dispatch import LocalDispatcher
    from raysfl.engine.runner import local_dispatcher

    prep = prepare(scenario_from_dict(tiny({})))
    on_cpu = local_dispatcher(prep)
    placement = on_cpu.placement()
    assert placement["device"] == "cpu" and placement["device_name"] == "cpu"
    host = ServerHost(prep.setup, prep.dataset.test_x, prep.dataset.test_y, prep.transform, device="meta")
    assert host.device == "meta" and host.device_name() == "meta"
    placement = LocalDispatcher(on_cpu.clients, host).placement()  # not "cpu" whatever the device
    assert placement["device"] == "meta" and placement["device_name"] == "meta"


@pytest.mark.parametrize("user_setting", [None, ":16:8"])
def test_deterministic_cuda_sets_the_flags_and_keeps_a_users_cublas_workspace(monkeypatch, user_setting):
    import torch.utils.deterministic as det

    from raysfl.engine.hosts import deterministic_cuda

    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", user_setting or "")  # remembers the variable's state
    if user_setting is None:
        monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG")
    cudnn = torch.backends.cudnn
    saved = (
        cudnn.benchmark,
        cudnn.deterministic,
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        det.fill_uninitialized_memory,
    )
    try:
        deterministic_cuda()
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == (user_setting or ":4096:8")
        assert cudnn.deterministic and not cudnn.benchmark
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()
        assert not det.fill_uninitialized_memory
    finally:  # process-wide flags: give the other tests theirs back
        cudnn.benchmark, cudnn.deterministic = saved[0], saved[1]
        torch.use_deterministic_algorithms(saved[2], warn_only=saved[3])
        det.fill_uninitialized_memory = saved[4]
