"""A run's processors: the note that says a run's actors ran on more than one processor model."""

import json

import raysfl.engine.dispatch as dispatch
from raysfl.engine.provenance import mixed_processors_note
from raysfl.engine.runner import run
from raysfl.scenario import scenario_from_dict

from .test_gas_local_run import BASE

EPYC, XEON = "AMD EPYC 7B13", "Intel(R) Xeon(R) CPU @ 2.20GHz"


def test_one_processor_model_needs_no_note():
    assert (
        mixed_processors_note({"device": "cpu", "processor": EPYC, "pool_processors": [EPYC, EPYC]}) is None
    )
    assert mixed_processors_note({}) is None  # a summary written before processors were recorded


def test_mixed_pools_and_server_are_named_with_their_counts():
    note = mixed_processors_note({"device": "cpu", "processor": EPYC, "pool_processors": [XEON, EPYC, XEON]})
    assert note is not None
    assert note.startswith(
        f"the server and the pools ran on 2 processor models ({EPYC}: the server and 1 pool; "
    )
    assert f"{XEON}: 2 pools);" in note
    assert "repeats bit for bit only where its actors land on the same processor models" in note
    only_server = mixed_processors_note(
        {"processor": XEON, "pool_processors": [EPYC]}
    )  # device unrecorded: cpu
    assert only_server is not None and f"({XEON}: the server; {EPYC}: 1 pool)" in only_server


def test_a_gpu_server_counts_by_its_pools_alone():
    # the server's bits come from its GPU, on the node its request fixes: its host CPU does not count
    gpu = {"device": "cuda", "device_name": "NVIDIA H200", "processor": XEON}
    assert mixed_processors_note({**gpu, "pool_processors": [EPYC, EPYC]}) is None
    note = mixed_processors_note({**gpu, "pool_processors": [EPYC, XEON]})
    assert note is not None and f"({EPYC}: 1 pool; {XEON}: 1 pool)" in note


def test_a_run_prints_the_note_when_its_placement_holds_two_processor_models(tmp_path, monkeypatch, capsys):
    """The runner prints the note to stderr at the start, and records both models in the summary.

    The local backend runs everything in one process, so both of its readings of the processor are the
    same; here the first (the server's) reads as another model, as a pool on a second node would.
    """
    sc = scenario_from_dict(BASE, ["train.global_iterations=1"])
    run(sc, tmp_path / "same", backend="local")
    assert "processor models" not in capsys.readouterr().err

    readings = iter([XEON, EPYC])
    monkeypatch.setattr(dispatch, "processor_name", lambda: next(readings))
    run(sc, tmp_path / "mixed", backend="local")
    err = capsys.readouterr().err
    assert (
        f"raysfl: the server and the pools ran on 2 processor models ({XEON}: the server; {EPYC}: 1 pool)"
        in err
    )
    placement = json.loads((tmp_path / "mixed" / "summary.json").read_text())["placement"]
    assert (placement["processor"], placement["pool_processors"]) == (XEON, [EPYC])
