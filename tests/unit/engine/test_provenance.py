"""A run's processors: the note that says a run's actors ran on more than one processor model."""

from raysfl.engine.provenance import mixed_processors_note

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
