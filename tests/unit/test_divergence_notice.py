"""The run's warning when its test loss becomes NaN or infinite (raysfl.metrics.divergence)."""

import math
import warnings

import pytest

from raysfl.cli import main
from raysfl.config import dumps_toml
from raysfl.engine.loop import ResumableSink
from raysfl.metrics.divergence import DivergenceNotice


def test_warns_once_at_the_first_non_finite_loss_and_not_for_a_high_finite_one():
    sink = DivergenceNotice()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        sink.on_eval({"iteration": 5, "loss": 9.5, "accuracy": 0.1})  # high, but a number
        sink.on_eval({"iteration": 6, "accuracy": 0.1})  # a method that reports no loss
        sink.on_eval({"iteration": 10, "loss": math.inf, "accuracy": 0.1})
        sink.on_eval({"iteration": 15, "loss": math.nan, "accuracy": 0.1})
    assert [str(w.message) for w in seen] == [
        "the test loss is inf at global iteration 10: the model diverged, and the run goes on with it "
        "(a smaller train.lr, or train.clip_grad_norm, can prevent it)"
    ]


def test_a_resumed_run_that_had_diverged_warns_again():
    sink = DivergenceNotice()
    assert isinstance(sink, ResumableSink)
    evals = [
        {"iteration": 0, "loss": 2.3},
        {"iteration": 5, "loss": math.nan},
        {"iteration": 10, "loss": math.nan},
    ]
    with pytest.warns(UserWarning, match="is nan at global iteration 5:"):
        sink.resume(None, evals)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sink.on_eval({"iteration": 15, "loss": math.nan})  # already said
        DivergenceNotice().resume(None, evals[:1])  # nothing to say


def test_a_run_that_diverges_says_so_on_the_terminal(tmp_path, capsys):
    """FedAvg at a learning rate of 1e6 breaks the model in its first round; the run still ends normally."""
    scenario = {
        "name": "diverges",
        "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 100, "synthetic_test": 20},
        "model": {"name": "lenet5"},
        "federation": {"num_clients": 4, "active_clients": 2},
        "train": {"global_iterations": 2, "local_iterations": 2, "batch_size": 8, "lr": 1e6},
        "algorithm": {"name": "fedavg"},
        "metrics": {"progress": False, "tensorboard": False},
    }
    path = tmp_path / "diverges.toml"
    path.write_text(dumps_toml(scenario))
    assert main(["run", str(path), "--backend", "local", "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "raysfl: warning: the test loss is nan at global iteration 1: the model diverged" in err
    assert err.count("the model diverged") == 1
