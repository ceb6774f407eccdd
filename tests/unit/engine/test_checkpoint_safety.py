"""Crafted checkpoints: ``raysfl run --resume`` refuses them (exit 2) before anything is created or run.

Each case writes a checkpoint into a real run directory, as an attacker who can hand over a run directory
would: the newest checkpoint of a finished-then-"crashed" run, with one node of its policy tree replaced.
The resume must exit 2 with a message naming the offending class, leave the run directory as it was and,
for the file-deleting gadget, leave the targeted file in place.
"""

import gc
import pickle
import shutil
from pathlib import Path

import pytest

from raysfl.cli import main
from raysfl.engine import runner
from raysfl.engine.snapshot import load_tree, save_tree
from raysfl.scenario import scenario_from_dict

NEWEST = "ckpt-000004.pt"


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    """A small FedAvg run killed after its last checkpoint (no summary.json): ready to be resumed."""
    root = tmp_path_factory.mktemp("base")
    doc = {
        "name": "ck-safety",
        "seed": 3,
        "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 300, "synthetic_test": 60},
        "model": {"name": "lenet5"},
        "federation": {"num_clients": 5, "active_clients": 3},
        "train": {"global_iterations": 4, "local_iterations": 2, "batch_size": 16},
        "algorithm": {"name": "fedavg"},
        "metrics": {"progress": False},
        "engine": {"checkpoint_every": 2, "keep_checkpoints": 10},
    }
    runner.run(scenario_from_dict(doc), root / "run", backend="local")
    (root / "run" / "summary.json").unlink()
    assert (root / "run" / "checkpoints" / NEWEST).is_file()
    return root / "run"


def files(run_dir: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def resume(run_dir: Path, capsys) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["run", "--resume", str(run_dir), "--backend", "local"])
    gc.collect()  # a finaliser of anything the resume created would run now
    return code, capsys.readouterr().err


def plant(base_run: Path, tmp_path: Path, node: dict) -> Path:
    """A copy of the run whose newest checkpoint's policy carries ``node`` as an extra attribute."""
    run_dir = tmp_path / "run"
    shutil.copytree(base_run, run_dir)
    path = run_dir / "checkpoints" / NEWEST
    ck = load_tree(path)
    ck["policy"]["attrs"]["planted"] = node
    save_tree(ck, path)
    return run_dir


def obj(cls: str, **attrs) -> dict:
    return {"t": "obj", "id": 10**6, "cls": cls, "attrs": attrs}


TEMPFILE_CLOSER = "raysfl.engine.snapshot:torch.serialization.tempfile._TemporaryFileCloser"


def test_the_tempfile_closer_gadget_is_refused_and_deletes_nothing(base_run, tmp_path, capsys):
    """The gadget of the report: a finaliser that unlinks ``name`` when ``delete`` is set."""
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    run_dir = plant(base_run, tmp_path, obj(TEMPFILE_CLOSER, name=str(victim), delete=True))
    before = files(run_dir)
    code, err = resume(run_dir, capsys)
    assert code == 2
    assert victim.read_text() == "keep me"
    assert f"class '{TEMPFILE_CLOSER}' is not one that raysfl checkpoints" in err
    assert NEWEST in err and "refused" in err and "Traceback" not in err
    assert files(run_dir) == before  # refused before any output was opened


@pytest.mark.parametrize(
    "node",
    [
        obj("os:_wrap_close"),  # a class outside raysfl
        obj("raysfl.metrics.parquet:MetricsLog", path="x"),  # a raysfl class that is not a state class
        obj("raysfl.engine.runner:json.JSONDecoder"),  # a dotted path through an imported module
        obj("raysfl.algorithms.gas.policy:GASPolicy.start"),  # an attribute of a state class
        obj("raysfl.engine.runner:run"),  # a function
        obj("builtins:print"),  # a builtin
        obj("builtins:object"),  # a builtin class
        {"t": "enum", "cls": "raysfl.engine.runner:signal.Signals", "v": 9},  # an enum reached via a module
        {"t": "optim", "id": 10**6, "cls": "torch.optim.lbfgs:LBFGS", "groups": [], "state": []},
        {"t": "optim", "id": 10**6, "cls": f"torch.optim.sgd:{TEMPFILE_CLOSER.split(':')[1]}", "groups": []},
    ],
    ids=lambda n: f"{n['t']}-{n['cls']}",
)
def test_any_class_outside_the_allow_list_is_refused(base_run, tmp_path, capsys, node):
    run_dir = plant(base_run, tmp_path, node)
    before = files(run_dir)
    code, err = resume(run_dir, capsys)
    assert code == 2 and "Traceback" not in err
    assert f"class '{node['cls']}' is not one that raysfl checkpoints" in err
    assert files(run_dir) == before


def test_a_registered_class_cannot_smuggle_dunder_attributes(base_run, tmp_path, capsys):
    """A state class is fine; setting ``__class__`` / ``__dict__`` through it is not a field."""
    cursor = obj(
        "raysfl.algorithms.common.batching:BatchCursor", __dict__={"t": "dict", "id": 10**7, "items": []}
    )
    run_dir = plant(base_run, tmp_path, cursor)
    before = files(run_dir)
    code, err = resume(run_dir, capsys)
    assert code == 2 and "Traceback" not in err
    assert "attribute '__dict__' of raysfl.algorithms.common.batching:BatchCursor is not a field" in err
    assert files(run_dir) == before


def test_a_checkpoint_that_pickles_code_is_refused_and_runs_nothing(base_run, tmp_path, capsys):
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    run_dir = tmp_path / "run"
    shutil.copytree(base_run, run_dir)

    class Remove:
        def __reduce__(self):
            return (Path.unlink, (victim,))

    (run_dir / "checkpoints" / NEWEST).write_bytes(
        pickle.dumps({"format": 1, "policy": Remove()}, protocol=2)
    )
    before = files(run_dir)
    code, err = resume(run_dir, capsys)
    assert code == 2 and victim.read_text() == "keep me"
    assert "references Python code" in err and "GLOBAL getattr" in err and NEWEST in err
    for advice in ("weights_only", "safe_globals", "trust"):
        assert advice not in err, advice
    assert files(run_dir) == before
