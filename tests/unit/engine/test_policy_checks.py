"""The coordinator refuses, in the policy's terms, actions the engine would otherwise fail on deep inside a
sink or a pool (or drop silently): client calls without their client, reports without their iteration,
log rows the event log cannot hold. And a method's own event-log columns reach events.parquet."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from raysfl.api import AlgorithmSpec, check_spec
from raysfl.engine import runner
from raysfl.engine.policy_errors import PolicyError
from raysfl.metrics.columns import ENGINE_COLUMNS, row_problems
from tests.faulty_methods import faulty_scenario
from tests.unit.engine.test_checkpoint_resume import crash_after, rows


@pytest.mark.parametrize(
    ("b", "message"),
    [
        (
            95,
            r"on_event\('arrival' at t = [0-9.e+]+\) returned Call\(CLIENT, 'train'\) with client = -1; a "
            r"client call names the virtual client it runs for: client = a whole number from 0 below K = 5",
        ),
        (96, r"returned Call\(CLIENT, 'train'\) with client = 5; .* from 0 below K = 5"),
        (97, r"returned Report\(Slot\(name=\('eval',\)\)\) with no 'iteration' in its info \(\['t'\]\)"),
        (
            98,
            r"logged a row events.parquet cannot hold: column 'my_note' is not one of events.parquet's\. "
            r"A method adds columns of its own in AlgorithmSpec.event_columns \(name → int64 \| float64 \| "
            r"string \| bool\)",
        ),
        (99, r"column 'staleness' holds int64, not Tensor tensor\(2\)"),
        (100, r"column 'staleness' holds int64, not float 2.0"),
        (
            101,
            r"returned Report\(Slot\(name=\('eval',\)\)\) with 'bytes_up' in its info, which the engine "
            r"writes",
        ),
    ],
    ids=[
        "no-client",
        "client-K",
        "report-without-iteration",
        "undeclared-column",
        "tensor",
        "float-in-int",
        "report-with-engine-key",
    ],
)
def test_a_policy_mistake_is_refused_before_it_reaches_a_pool_or_a_sink(tmp_path, b, message):
    with pytest.raises(PolicyError, match=message):
        runner.run(faulty_scenario("MISTAKES", f"algorithm.params.b={b}"), tmp_path / "run", backend="local")


def test_a_methods_own_columns_are_written_after_the_engines_and_survive_a_resume(tmp_path):
    sc = faulty_scenario("OWN_COLUMNS", "engine.checkpoint_every=4", "engine.keep_checkpoints=5")
    runner.run(sc, tmp_path / "run", backend="local")
    crashed = crash_after(tmp_path / "run", tmp_path / "crashed", "ckpt-000004.pt")
    assert runner.run(sc, crashed, backend="local", resume=True)["resumed_from"] == "ckpt-000004.pt"
    assert rows(crashed / "events.parquet") == rows(tmp_path / "run" / "events.parquet")
    table = pq.read_table(tmp_path / "run" / "events.parquet")
    assert table.schema.names == [*ENGINE_COLUMNS, "hinge_b", "odd_version"]
    arrivals = [r for r in table.to_pylist() if r["kind"] == "arrival"]
    assert len(arrivals) == 12  # all arrivals, across the segments the checkpoints sealed
    assert {r["hinge_b"] for r in arrivals} == {2.0}
    assert [r["odd_version"] for r in arrivals] == [r["version"] % 2 == 1 for r in arrivals]
    assert all(r["hinge_b"] is None for r in table.to_pylist() if r["kind"] != "arrival")


def test_row_checks_by_hand():
    columns = {**ENGINE_COLUMNS, "flag": "bool", "note": "string"}
    assert row_problems({"t": 1, "client": 3, "note": "x", "flag": False, "queue_s": None}, columns) == []
    assert row_problems({"client": True, "flag": 1, "note": 2}, columns) == [
        "column 'client' holds int64, not bool True",
        "column 'flag' holds bool, not int 1",
        "column 'note' holds string, not int 2",
    ]


@pytest.mark.parametrize(
    ("columns", "problem"),
    [
        ({"client": "int64"}, "column 'client' is one of the engine's (t, kind, client,"),
        ({"my col": "int64"}, "column 'my col' is not a name (letters, digits, _)"),
        (
            {"ratio": "float32"},
            "column 'ratio' has type 'float32'; it is one of 'int64', 'float64', 'string', 'bool'",
        ),
        (["ratio"], "event_columns must map column names to types"),
    ],
)
def test_a_spec_declaring_bad_columns_is_refused_when_loaded(columns, problem):
    from tests.faulty_methods import OWN_COLUMNS

    spec = AlgorithmSpec(**{**vars(OWN_COLUMNS), "event_columns": columns})
    (found,) = check_spec(spec, "algorithm.name")
    assert problem in found


def test_call_checks_by_hand():
    from raysfl.api import CLIENT, SERVER, Call
    from raysfl.engine.policy_errors import call_problem

    assert call_problem(Call(SERVER, "evaluate"), 5) is None
    assert call_problem(Call(CLIENT, "train", client=4), 5) is None
    assert call_problem(Call(CLIENT, "train", client=4), None) is None
    assert (
        call_problem(Call("pool", "train", client=1), 5)
        == "Call('pool', 'train'): the target is SERVER or CLIENT"
    )
    assert "with client = True;" in call_problem(Call(CLIENT, "train", client=True), 5)
    assert "with client = 2.0;" in call_problem(Call(CLIENT, "train", client=2.0), 5)


def test_a_resume_whose_event_log_segment_is_damaged_or_gone_is_refused_before_it_trains(tmp_path):
    """The segments are joined only when the run ends; a bad one was found there, after all the training,
    with a pyarrow traceback and a half-joined events.parquet left behind."""
    from raysfl.engine.checkpoint import CheckpointError

    sc = faulty_scenario("SPEC", "engine.checkpoint_every=4", "engine.keep_checkpoints=5")
    runner.run(sc, tmp_path / "run", backend="local")
    for damage in ("garbage", "missing"):
        crashed = crash_after(tmp_path / "run", tmp_path / damage, "ckpt-000008.pt")
        segment = crashed / "checkpoints" / "events-000004.parquet"
        segment.write_text("garbage") if damage == "garbage" else segment.unlink()
        with pytest.raises(
            CheckpointError, match=f"the event log segment {segment} that the checkpoint continues"
        ):
            runner.run(sc, crashed, backend="local", resume=True)
        assert not (crashed / "summary.json").exists() and not (crashed / "events.parquet.joining").exists()
