"""Safe snapshots: identity, random streams, modules and optimizers survive a weights-only round trip."""

import collections
import pickle
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from raysfl.algorithms.common.batching import BatchCursor
from raysfl.algorithms.common.split_client import SplitClientState
from raysfl.engine.snapshot import (
    SnapshotError,
    capture,
    check_state_class,
    check_tree,
    engine_state_classes,
    load_tree,
    rebuild,
    save_tree,
    state_classes,
)


def _round_trip(obj, tmp_path, **kwargs):
    save_tree(capture(obj, kwargs.pop("externals", None)), tmp_path / "s.pt")
    return rebuild(load_tree(tmp_path / "s.pt"), **kwargs)


def test_client_state_continues_its_random_streams_and_keeps_the_optimizer_bound(tmp_path):
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(11, spawn_key=(4,))))
    params = {"w": torch.randn(3, requires_grad=True)}
    opt = torch.optim.SGD(list(params.values()), lr=0.1, momentum=0.9)
    params["w"].sum().backward()
    opt.step()
    state = SplitClientState(
        2, np.arange(7), BatchCursor(num_samples=7, batch_size=3), rng, torch.Generator().manual_seed(5)
    )
    state.params, state.optimizer = params, opt
    back = _round_trip(state, tmp_path)

    assert back.rng.random() == rng.random()  # the numpy stream goes on where it stopped
    assert torch.equal(torch.rand(4, generator=back.torch_gen), torch.rand(4, generator=state.torch_gen))
    assert back.optimizer.param_groups[0]["params"][0] is back.params["w"]  # one tensor, not a copy
    assert back.params["w"].requires_grad and back.params["w"].is_leaf
    # one more identical step on both: momentum state came back too
    for p, o in ((params, opt), (back.params, back.optimizer)):
        o.zero_grad()
        (p["w"] ** 2).sum().backward()
        o.step()
    assert torch.equal(back.params["w"], params["w"])
    assert back.cursor == state.cursor and np.array_equal(back.indices, state.indices)


def test_containers_identity_and_big_integers(tmp_path):
    shared = [1, 2]
    obj = {
        "a": shared,
        "b": shared,
        "q": collections.deque([3, 4], maxlen=5),
        "s": {5, 6},
        "t": (7, "x"),
        "od": collections.OrderedDict(z=1),
        "dd": collections.defaultdict(list, {1: [2]}),
        "big": 2**100,
        "seq": np.random.SeedSequence(5, spawn_key=(1, 2)),
        "npf": np.float32(1.5),
        "key": {(1, "x"): 3},
    }
    back = _round_trip(obj, tmp_path)
    assert back["a"] is back["b"] and back["a"] == [1, 2]
    assert back["q"] == collections.deque([3, 4]) and back["q"].maxlen == 5
    assert back["s"] == {5, 6} and back["t"] == (7, "x") and back["key"] == {(1, "x"): 3}
    assert isinstance(back["od"], collections.OrderedDict) and back["dd"]["new"] == []
    assert back["big"] == 2**100 and back["npf"] == np.float32(1.5) and back["npf"].dtype == np.float32
    assert np.array_equal(back["seq"].generate_state(4), obj["seq"].generate_state(4))


def test_module_is_restored_into_the_fresh_build_and_an_optimizer_rebinds_to_it(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(4, 2)).sum().backward()
    opt.step()
    model.eval()
    fresh = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    back = _round_trip({"opt": opt, "model": model}, tmp_path, target={"model": fresh})
    assert back["model"] is fresh and not fresh.training
    for (_, a), (_, b) in zip(model.state_dict().items(), fresh.state_dict().items(), strict=True):
        assert torch.equal(a, b)
    bound = {id(p) for g in back["opt"].param_groups for p in g["params"]}
    assert bound == {id(p) for p in fresh.parameters()}  # the optimizer trains the restored module
    assert back["opt"].state[fresh[0].weight]["step"] == opt.state[model[0].weight]["step"]


def test_externals_travel_by_name_and_functions_stay_those_of_the_fresh_build(tmp_path):
    data = np.arange(10)

    def transform(x):
        return x

    tree = capture({"data": data, "fn": transform}, {"train_x": data})
    assert tree["items"][0][1] == {"t": "ext", "name": "train_x"}  # stored by name, not by value

    def fresh_fn(x):
        return x

    back = rebuild(tree, {"train_x": "DATA"}, target={"fn": fresh_fn})
    assert back == {"data": "DATA", "fn": fresh_fn}
    with pytest.raises(
        SnapshotError, match=r"held a function here \(.*transform\)\. Functions are never stored"
    ):
        rebuild(tree, {"train_x": "DATA"})


def test_refuses_autograd_graphs_and_foreign_classes(tmp_path):
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(SnapshotError, match=r"state\['y'\]: tensor still carries an autograd graph"):
        capture({"y": x * 2})

    class Foreign:
        pass

    Foreign.__module__ = "somewhere.else"
    with pytest.raises(SnapshotError, match="is not a state class"):
        capture(Foreign())
    forged = {"t": "obj", "id": 0, "cls": "os:_wrap_close", "attrs": {}}
    with pytest.raises(SnapshotError, match="not one that raysfl checkpoints"):
        rebuild(forged)


def test_checkpoint_files_cannot_run_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / "evil.pt"
    with open(path, "wb") as f:
        pickle.dump({"t": Evil()}, f, protocol=2)
    with pytest.raises(pickle.UnpicklingError):
        load_tree(path)


def test_the_allow_list_holds_the_engines_and_every_registered_methods_classes():
    from raysfl.algorithms import ALGORITHMS

    allowed = state_classes()
    for cls in engine_state_classes():
        assert allowed[f"{cls.__module__}:{cls.__qualname__}"] is cls
    for spec in ALGORITHMS.values():
        for cls in (spec.params, *spec.state_classes):
            assert allowed[f"{cls.__module__}:{cls.__qualname__}"] is cls, (spec.name, cls)
    assert all(isinstance(c, type) for c in allowed.values())


def test_the_allow_list_is_checked_once_for_the_same_specs(monkeypatch):
    """Every capture and rebuild asks for the allow-list (a checkpoint: once per client, 4.7 s of 10,000
    fresh FedAsync states' capture before): the same spec objects are checked once; other specs, or a spec
    added since, are checked again, so a bad class is still refused."""
    import dataclasses

    from raysfl.algorithms import ALGORITHMS
    from raysfl.engine import snapshot

    checked = []
    real = snapshot.check_state_class
    monkeypatch.setattr(snapshot, "check_state_class", lambda cls, by: checked.append(cls) or real(cls, by))
    specs = list(ALGORITHMS.values())[:3]
    first = state_classes(specs)
    expected, n = dict(first), len(checked)
    assert n > 0 and state_classes(specs) == expected and len(checked) == n  # not checked again
    first["x:y"] = int  # a caller's change does not reach the next call
    assert state_classes(specs) == expected

    class Local:
        pass

    bad = dataclasses.replace(specs[0], name="bad", state_classes=(Local,))
    with pytest.raises(SnapshotError, match="AlgorithmSpec 'bad'.state_classes: .*Local is not defined"):
        state_classes([*specs, bad])
    assert len(checked) > n  # the new set was checked


def test_state_classes_must_be_plain_classes_defined_where_they_say():
    with pytest.raises(SnapshotError, match="defines __del__"):
        check_state_class(tempfile._TemporaryFileCloser, "spec 'x'")

    class Local:
        pass

    with pytest.raises(SnapshotError, match="spec 'x': .*Local is not defined under that name in its module"):
        check_state_class(Local, "spec 'x'")
    Local.__module__, Local.__qualname__ = "raysfl.engine.snapshot", "Local"  # claims to live elsewhere
    with pytest.raises(SnapshotError, match="not defined under that name"):
        check_state_class(Local, "spec 'x'")
    with pytest.raises(SnapshotError, match="is not a class"):
        check_state_class(print, "spec 'x'")
    with pytest.raises(SnapshotError, match="exception, module, optimizer or protocol"):
        check_state_class(SnapshotError, "spec 'x'")
    with pytest.raises(SnapshotError, match="has its own __new__"):
        check_state_class(collections.OrderedDict, "spec 'x'")
    assert check_state_class(BatchCursor, "spec 'x'") is BatchCursor


def test_capture_refuses_what_a_checkpoint_could_not_recreate():
    from raysfl.metrics.parquet import MetricsLog

    with pytest.raises(
        SnapshotError, match=r"state\['log'\]: raysfl.metrics.parquet:MetricsLog is not a state"
    ):
        capture({"log": MetricsLog(Path("m.parquet"))})
    w = torch.zeros(2, requires_grad=True)
    with pytest.raises(SnapshotError, match="optimizer torch.optim.rmsprop:RMSprop is not one of SGD, Adam"):
        capture(torch.optim.RMSprop([w]))
    assert (
        capture(BatchCursor(num_samples=3, batch_size=2))["cls"]
        == "raysfl.algorithms.common.batching:BatchCursor"
    )


CURSOR = "raysfl.algorithms.common.batching:BatchCursor"


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ({"t": "npgen", "id": 0, "state": {"t": "dict", "id": 1, "items": [["bit_generator", "seed"]]}},
         "unknown numpy bit generator 'seed'"),
        ({"t": "npscalar", "dtype": "|O", "v": 1}, "numpy scalar of dtype object is not plain data"),
        ({"t": "enum", "cls": "raysfl.algorithms.actions:Event", "v": 1}, "is not an enum"),
        ({"t": "ref", "id": 7}, "not a well-formed snapshot"),
        ({"t": "obj", "id": 0, "cls": CURSOR, "attrs": {"__class__": 1}},
         f"attribute '__class__' of {CURSOR} is not a field"),
    ],
)  # fmt: skip
def test_rebuild_refuses_anything_but_plain_data_and_state_classes(node, message):
    with pytest.raises(SnapshotError, match=message):
        rebuild(node)


def test_check_tree_finds_a_forbidden_class_anywhere_in_a_tree():
    deep = {"t": "dict", "id": 0, "items": [["a", {"t": "list", "id": 1, "items": [
        {"t": "obj", "id": 2, "cls": "raysfl.engine.snapshot:os.system", "attrs": {}}]}]]}  # fmt: skip
    with pytest.raises(
        SnapshotError, match=r"state.items\[0\]\[1\].items\[0\]: class 'raysfl.engine.snapshot:os"
    ):
        check_tree(deep)
    check_tree(
        capture({"cursor": BatchCursor(num_samples=3, batch_size=2), "opt": None})
    )  # a real tree passes


def test_a_refused_object_is_named_by_where_it_is_kept():
    """A checkpoint error says which object holds the refused one: the policy, the server's or a pool's
    logic, or one client's state (the API audit's message began with a bare "state:")."""

    class Unlisted:
        pass

    with pytest.raises(SnapshotError, match=r"^client_state\[7\]\['note'\]: .*Unlisted is not a state class"):
        capture({"note": Unlisted()}, root="client_state[7]")
