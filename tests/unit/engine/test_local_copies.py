"""The local backend passes values between calls as Ray does: as copies, so what one side does in place to a
value it sent or received is not seen by the other (the helper audit's finding: a client that changed the
received global model in place changed the server's model in one process, and the numbers with it)."""

from __future__ import annotations

import pyarrow.parquet as pq
import torch

from raysfl.engine import runner
from raysfl.engine.dispatch import as_sent
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
