"""What a method's ``evaluate`` returns becomes a metrics row: numbers in, at least accuracy and loss.

0-d tensors and NumPy scalars used to be dropped from metrics.parquet (the run then crashed writing
summary.json); a mapping without ``accuracy`` made a run that "finished no evaluation".
"""

import json

import pyarrow.parquet as pq
import pytest

from examples.fedasync_hinge.test_fedasync_hinge import SCENARIO
from raysfl.cli import main
from raysfl.engine import runner
from raysfl.engine.loop import metric_values
from raysfl.engine.policy_errors import EvaluateError
from raysfl.scenario import load_scenario
from tests.faulty_methods import LONGER, METHODS, faulty_scenario


def test_tensor_and_numpy_scalars_from_evaluate_are_written_as_numbers(tmp_path):
    plain = runner.run(load_scenario(SCENARIO, LONGER), tmp_path / "plain", backend="local")
    scalars = runner.run(faulty_scenario("EVAL_TENSORS"), tmp_path / "scalars", backend="local")
    assert scalars["final_accuracy"] == plain["final_accuracy"] is not None
    table = pq.read_table(tmp_path / "scalars" / "metrics.parquet")
    assert {"accuracy", "loss", "alpha"} <= set(table.column_names)
    assert (
        table.column("accuracy").to_pylist()
        == pq.read_table(tmp_path / "plain" / "metrics.parquet").column("accuracy").to_pylist()
    )
    assert (
        json.loads((tmp_path / "scalars" / "summary.json").read_text())["final_accuracy"]
        == (plain["final_accuracy"])
    )


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ("EVAL_NO_ACCURACY", EvaluateError, r"evaluate returned no 'accuracy' \(its keys: 'acc', 'loss'\)"),
        ("EVAL_VECTOR", EvaluateError, r"evaluate returned 'per_class' = a Tensor of shape \(10,\)"),
        (
            "EVAL_CLASH",
            EvaluateError,
            r"evaluate returned 'iteration', 'bytes_up', a column its metrics row already has from the "
            r"engine or the policy's Report \('iteration', 't', 'bytes_up', 'bytes_down', 'events', "
            r"'wall_s'\); name the metric otherwise",
        ),
    ],
)
def test_evaluate_must_return_accuracy_loss_and_numbers(tmp_path, spec, error, message):
    with pytest.raises(error, match=message):
        runner.run(faulty_scenario(spec), tmp_path / "run", backend="local")


def test_the_command_line_says_a_methods_error_without_the_engines_traceback(tmp_path, capsys):
    """The messages name the method's fault; the traceback showed only the engine's check of it."""

    argv = ["run", str(SCENARIO), *LONGER, f'algorithm.name="{METHODS}:EVAL_VECTOR"', "--backend", "local"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert "raysfl: the method's logic: evaluate returned 'per_class' = a Tensor of shape (10,)" in err
    assert "(the evaluation reported as iteration 0)" in err and "Traceback" not in err
    argv = ["run", str(SCENARIO), *LONGER, f'algorithm.name="{METHODS}:MISTAKES"', "algorithm.params.b=96"]
    assert main([*argv, "--backend", "local", "--out", str(tmp_path / "run2")]) == 1
    err = capsys.readouterr().err
    assert "raysfl: the method's logic: the policy's on_event(" in err and "with client = 5" in err
    assert "Traceback" not in err


def test_metric_values_reads_scalars_and_names_what_is_wrong():
    import numpy as np
    import torch

    row = metric_values({"accuracy": torch.tensor(0.25, dtype=torch.float64), "loss": np.int64(3), "x": None})
    assert row == {"accuracy": 0.25, "loss": 3, "x": None}
    assert type(row["accuracy"]) is float and type(row["loss"]) is int
    with pytest.raises(TypeError, match=r"evaluate returned a tuple; it must return a mapping"):
        metric_values((0.5, 1.0))
    with pytest.raises(TypeError, match=r"'hist' = a list; a metric is one number"):
        metric_values({"accuracy": 0.5, "loss": 1.0, "hist": [1, 2]})
    with pytest.raises(ValueError, match=r"no 'accuracy' and no 'loss' \(its keys: none\)"):
        metric_values({})
    with pytest.raises(ValueError, match=r"evaluate returned 't', a column its metrics row already has"):
        metric_values({"accuracy": 0.5, "loss": 1.0, "t": 3.0}, taken=("iteration", "t"))
    assert metric_values({"accuracy": 0.5, "loss": 1.0, "t": 3.0}) == {"accuracy": 0.5, "loss": 1.0, "t": 3.0}


def test_summary_final_metrics_are_the_last_rows_numbers(tmp_path):
    """summary.json's final_metrics held only the traffic counters, none of the method's own metrics."""
    runner.run(load_scenario(SCENARIO, LONGER), tmp_path / "run", backend="local")
    last = pq.read_table(tmp_path / "run" / "metrics.parquet").to_pylist()[-1]
    final = json.loads((tmp_path / "run" / "summary.json").read_text())["final_metrics"]
    assert {"accuracy", "loss", "mean_alpha"} <= set(final)
    assert final == {k: last[k] for k in final}
    assert not {"iteration", "t", "wall_s", "bytes_up", "bytes_down", "events"} & set(final)


def test_final_metrics_are_json_numbers():
    """A diverged loss (NaN) made summary.json hold NaN, which is no JSON; NumPy scalars were left out."""
    import math

    import numpy as np

    from raysfl.engine.runner import final_metrics

    last = {"iteration": 4, "t": 2.0, "accuracy": 0.1, "loss": math.nan, "gap": np.float32(0.5), "ok": True}
    final = final_metrics({**last, "spread": -math.inf, "note": "text", "wall_s": 3.0})
    assert final == {"accuracy": 0.1, "loss": None, "gap": 0.5, "spread": None}
    json.dumps(final, allow_nan=False)
