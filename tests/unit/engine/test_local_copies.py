"""The local backend passes values between calls as Ray does: as copies, so what one side does in place to a
value it sent or received is not seen by the other (the helper audit's finding: a client that changed the
received global model in place changed the server's model in one process, and the numbers with it)."""

from __future__ import annotations

import pyarrow.parquet as pq
import torch

from raysfl.engine import runner
from raysfl.engine.copies import as_sent
from tests.faulty_methods import faulty_scenario


def test_a_client_changing_what_it_received_changes_nothing_else(tmp_path):
    plain = runner.run(faulty_scenario("SPEC"), tmp_path / "plain", backend="local")
    careless = runner.run(faulty_scenario("MUTATES_RECEIVED"), tmp_path / "careless", backend="local")
    assert careless["final_accuracy"] == plain["final_accuracy"]
    assert (
        pq.read_table(tmp_path / "careless" / "metrics.parquet")
        .drop(["wall_s"])
        .equals(pq.read_table(tmp_path / "plain" / "metrics.parquet").drop(["wall_s"]))
    )


def test_a_sent_value_shares_nothing_with_the_original():
    weights = {"w": torch.arange(6.0), "step": torch.tensor(3)}
    view = {"head": weights["w"][:2]}  # a view into another value's storage
    sent = as_sent((weights, view))
    weights["w"].add_(1)
    assert torch.equal(sent[0]["w"], torch.arange(6.0)) and torch.equal(sent[1]["head"], torch.arange(2.0))
    sent[0]["step"].zero_()
    assert int(weights["step"]) == 3
    f = lambda x: x  # noqa: E731 - a value the standard pickle cannot send: passed as it is
    assert as_sent(f) is f


def _shape_of(value, storages: dict) -> object:
    """A value's structure as a pickle round trip must keep it: types, tensor layouts and which tensors
    share a storage (numbered in order of first sight: none after the trip), array layouts, contents."""
    import numpy as np

    if isinstance(value, dict):
        attributes = getattr(value, "__dict__", None)  # an OrderedDict state dict's _metadata
        return (type(value), [(k, _shape_of(v, storages)) for k, v in value.items()], attributes)
    if isinstance(value, (list, tuple)):
        return (type(value), [_shape_of(v, storages) for v in value])
    if isinstance(value, torch.Tensor):
        shared = storages.setdefault(value.untyped_storage().data_ptr(), len(storages))
        return (
            type(value),
            value.dtype,
            tuple(value.size()),
            value.stride(),
            value.storage_offset(),
            shared,
            value.requires_grad,
            value.is_leaf,
            value.detach().float().tolist(),
        )
    if isinstance(value, np.ndarray):
        return (type(value), value.dtype, value.shape, value.strides, value.flags.writeable, value.tolist())
    return (type(value), value)


def test_a_sent_tree_is_what_a_pickle_round_trip_gives_without_pickling(monkeypatch):
    """Weights, activations and metrics are copied directly (ten times faster than pickling a LeNet state
    dict); the copy keeps what pickle keeps: types, a state dict's metadata, each view's offset and strides
    over a copy of its whole storage, requires_grad (a leaf), objects reached twice copied once."""
    import pickle
    from collections import OrderedDict

    import numpy as np

    import raysfl.engine.copies as copies

    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4))
    base = torch.arange(24.0).reshape(2, 3, 4)
    shared_list = [1, "two"]
    read_only = np.arange(3)
    read_only.flags.writeable = False  # as arrays from Ray's object store are
    value = {
        "weights": model.state_dict(),
        "views": (base, base[1], base.transpose(1, 2), base[:, 1:, ::2]),
        "channels_last": torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
        "leaf": torch.ones(3, requires_grad=True),
        "history": torch.ones(2, requires_grad=True) * 2,  # arrives as a leaf that requires grad
        "half": torch.arange(4, dtype=torch.bfloat16),
        "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        "read_only": read_only,
        "scalar": np.float32(2.5),
        "again": [shared_list, shared_list],
        "meta": OrderedDict(a=1, b=None),
    }
    assert isinstance(value["weights"], OrderedDict) and vars(value["weights"])  # _metadata
    expected = pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    monkeypatch.setattr(copies, "pickle", None)  # the tree must not take the pickle round trip
    sent = copies.as_sent(value)
    assert _shape_of(sent, {}) == _shape_of(expected, {})
    assert sent["again"][0] is sent["again"][1] and sent["again"][0] is not shared_list
    base.add_(100)  # nothing of the copy changes with the original
    value["weights"]["0.weight"].zero_()
    assert _shape_of(sent, {}) == _shape_of(expected, {})


def test_values_the_direct_copy_does_not_know_take_the_pickle_round_trip():
    from dataclasses import dataclass

    import numpy as np

    from raysfl.engine.copies import as_sent

    @dataclass
    class Upload:  # defined here: pickle cannot find it, so it is passed as it is
        weights: torch.Tensor

    param = torch.nn.Parameter(torch.ones(2))
    sent = as_sent({"p": param, "t": torch.zeros(1)})
    assert type(sent["p"]) is torch.nn.Parameter and sent["p"] is not param  # pickle keeps the subclass
    upload = Upload(torch.ones(1))
    assert as_sent(upload) is upload
    records = np.zeros(2, dtype=[("a", "i4"), ("b", "f8")])
    sent_record = as_sent({"r": records[0]})["r"]  # a structured scalar views its array
    sent_record["a"] = 7
    assert records[0]["a"] == 0


def test_the_values_benchmarks_local_copies_times_are_copied_as_pickle_copies_them():
    """The values methods send (state dicts of LeNet-5 and AlexNet, activations, gradients), from the
    benchmark script, so the script runs and what it times is the same copy."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "local_copies.py"
    spec = importlib.util.spec_from_file_location("local_copies", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for name, value in bench.cases():
        assert _shape_of(as_sent(value), {}) == _shape_of(bench.pickle_round_trip(value), {}), name
