"""Run outputs: TensorBoard against iteration and emulated time; Ctrl-C keeps what was written."""

import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from raysfl.engine.runner import run
from raysfl.scenario import scenario_from_dict
from tests.scenarios import TINY_GAS

from .test_gas_local_run import BASE

ROOT = Path(__file__).resolve().parents[3]


def test_tensorboard_has_the_promised_scalars(tmp_path):
    sc = scenario_from_dict(BASE, ["metrics.tensorboard=true"])
    run(sc, tmp_path / "r", backend="local")
    acc = EventAccumulator(str(tmp_path / "r" / "tb"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    for tag in (
        "test/accuracy",
        "test/accuracy_vs_emulated_ms",
        "test/loss",
        "comm/bytes_up",
        "comm/bytes_down",
        "buffer/share_fastest_quarter",
        "buffer/share_slowest_quarter",
        "speed/events_per_s",
        "time/emulated_s",
    ):
        assert tag in tags, tag
    assert "staleness" in acc.Tags()["histograms"]
    metrics = pq.read_table(tmp_path / "r" / "metrics.parquet").to_pylist()
    scalars = acc.Scalars("test/accuracy")
    assert [s.step for s in scalars] == [m["iteration"] for m in metrics]
    assert [s.wall_time for s in scalars] == [m["t"] for m in metrics]  # walltime = emulated seconds
    by_time = acc.Scalars("test/accuracy_vs_emulated_ms")
    assert [s.step for s in by_time] == [round(1000 * m["t"]) for m in metrics]
    assert len({s.step for s in by_time}) == len(metrics)  # evaluations < 1 s apart keep their own step


def test_every_number_of_an_evaluation_reaches_tensorboard(tmp_path):
    """The method's own counters (GAS: server updates, aggregations, generated activations) under
    ``method/``, the engine's event count, and staleness scalars beside the histogram."""
    sc = scenario_from_dict(BASE, ["metrics.tensorboard=true"])
    run(sc, tmp_path / "r", backend="local")
    acc = EventAccumulator(str(tmp_path / "r" / "tb"), size_guidance={"histograms": 0, "scalars": 0})
    acc.Reload()
    metrics = pq.read_table(tmp_path / "r" / "metrics.parquet").to_pylist()
    for key, tag in (
        ("server_updates", "method/server_updates"),
        ("aggregations", "method/aggregations"),
        ("generated", "method/generated"),
        ("events", "time/events"),
    ):
        expected = [(m["iteration"], m[key]) for m in metrics]
        assert [(p.step, p.value) for p in acc.Scalars(tag)] == expected, tag
    histograms = acc.Histograms("staleness")
    means, maxima = acc.Scalars("staleness/mean"), acc.Scalars("staleness/max")
    assert [p.step for p in means] == [p.step for p in maxima] == [h.step for h in histograms]
    for h, mean, high in zip(histograms, means, maxima, strict=True):
        assert mean.value == pytest.approx(h.histogram_value.sum / h.histogram_value.num)
        assert high.value == h.histogram_value.max
    events = pq.read_table(tmp_path / "r" / "events.parquet").to_pylist()
    assert max(p.value for p in maxima) == max(e["staleness"] for e in events if e["staleness"] is not None)


def _session_hparams(acc: EventAccumulator) -> dict:
    """The hyperparameters of the run's HParams session start, as Python values."""
    from google.protobuf.json_format import MessageToDict
    from tensorboard.plugins.hparams import metadata

    content = acc.PluginTagToContent(metadata.PLUGIN_NAME)
    assert metadata.EXPERIMENT_TAG not in content  # TensorBoard takes a sweep's union of the trials' own
    start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
    return MessageToDict(start)["hparams"]


def test_tensorboard_shows_the_configuration_and_its_hyperparameters(tmp_path):
    """``config`` text (config.toml without the per-client tables) and an HParams session whose values are
    the scenario's: a sweep's trials can be compared in TensorBoard's HParams dashboard."""
    import tomllib

    sc = scenario_from_dict(BASE, ["metrics.tensorboard=true", "algorithm.params.q_s=4"])
    run(sc, tmp_path / "r", backend="local")
    config = tomllib.loads((tmp_path / "r" / "config.toml").read_text())
    acc = EventAccumulator(str(tmp_path / "r" / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    (text,) = acc.Tensors("config/text_summary")
    assert text.step == 0 and text.wall_time == 0.0
    shown = text.tensor_proto.string_val[0].decode()
    assert shown.startswith("```toml\n") and shown.endswith("\n```")
    body = tomllib.loads(shown.removeprefix("```toml\n").removesuffix("\n```"))
    assert "devices" in config and "devices" not in body  # 10 rows here, 10,000 in a large run
    assert "client_sizes" in config["run"] and "client_sizes" not in body["run"]
    assert body["algorithm"] == config["algorithm"] and body["run"]["commit"] == config["run"]["commit"]
    import torch

    from raysfl.engine.provenance import processor_name

    assert config["run"]["torch_version"] == torch.__version__  # with the processor: a result's last bits
    assert config["run"]["driver_processor"] == processor_name() != ""
    hparams = _session_hparams(acc)
    assert hparams["seed"] == 7 and hparams["name"] == "tiny-gas"
    assert hparams["algorithm.name"] == "gas" and hparams["algorithm.params.q_s"] == 4
    assert hparams["federation.num_clients"] == 10 and hparams["data.dataset"] == "synthetic"
    assert hparams["algorithm.params.covariance"] == "diagonal"
    assert not any(k.startswith(("engine.", "metrics.", "devices", "run.")) for k in hparams)
    leaves = sum(len(v) for v in config["model"].values() if isinstance(v, dict))
    leaves += sum(1 for v in config["model"].values() if not isinstance(v, dict))
    assert sum(k.startswith("model.") for k in hparams) == leaves  # every leaf of the table


def test_hyperparameters_write_lists_as_toml_and_leave_out_what_has_no_value():
    """A user method's ``Any`` parameter may hold an int no double holds: text, not an OverflowError."""
    from raysfl.metrics.tensorboard import hparams_of, session_start

    config = {
        "seed": 3,
        "name": "x",
        "description": "not a hyperparameter",
        "model": {"name": "cnn", "widths": [8, 16], "head": {}},
        "train": {"lr": 0.01, "clip_grad_norm": None, "max_emulated_s": float("inf")},
        "algorithm": {"params": {"big": 10**400, "exact": 2**53, "low": -(2**53) - 1, "huge": 1 << 20_000}},
        "engine": {"pools": 2},
    }
    assert hparams_of(config) == {
        "seed": 3,
        "name": "x",
        "model.name": "cnn",
        "model.widths": "[8, 16]",
        "train.max_emulated_s": "inf",
        "algorithm.params.big": str(10**400),  # HParams numbers are doubles: as text, never rounded
        "algorithm.params.exact": 2**53,
        "algorithm.params.low": str(-(2**53) - 1),
        "algorithm.params.huge": "an int of 20001 bits",  # str() refuses ints of over 4300 digits
        "train.lr": 0.01,
    }
    start = session_start(hparams_of(config))
    assert start.value[0].tag == "_hparams_/session_start_info"


def test_an_evaluation_before_any_server_step_has_no_training_loss(tmp_path):
    """The first evaluation comes before any server step: its training loss is missing (a null in the
    parquet file, no TensorBoard point), not a 0.0 that reads as a perfect loss; later ones are real means."""
    sc = scenario_from_dict(BASE, ["metrics.tensorboard=true"])
    run(sc, tmp_path / "r", backend="local")
    metrics = pq.read_table(tmp_path / "r" / "metrics.parquet").to_pylist()
    assert metrics[0]["server_updates"] == 0 and metrics[0]["train_loss"] is None
    later = [m for m in metrics[1:] if m["server_updates"] > 0]
    assert later and all(1.0 < m["train_loss"] < 5.0 for m in later)
    acc = EventAccumulator(str(tmp_path / "r" / "tb"))
    acc.Reload()
    points = acc.Scalars("train/server_loss")
    assert [p.step for p in points] == [m["iteration"] for m in metrics if m["train_loss"] is not None]
    assert all(p.value > 1.0 for p in points)


def _stopped_local_run(
    tmp_path: Path, sig: int, ctrl_c: signal.Handlers = signal.SIG_DFL
) -> tuple[Path, str]:
    """A long local ``raysfl run`` sent ``sig`` once it has evaluated; its folder and stderr.

    ``ctrl_c`` is the SIGINT disposition it starts with: SIG_DFL as at a terminal (a test session started in
    the background by a non-interactive shell ignores SIGINT, and its children inherit that: the run went
    on after the test's SIGINT, a "flake"), SIG_IGN as a background job of a batch script.
    """
    scenario = tmp_path / "long.toml"
    scenario.write_text(
        'name = "long"\n[data]\ndataset = "synthetic"\n[model]\nname = "lenet5"\n'
        "[federation]\nnum_clients = 10\nactive_clients = 3\n[train]\nglobal_iterations = 100000\n"
        "local_iterations = 4\nbatch_size = 16\n"
        '[algorithm.params]\nq_s = 3\nq_c = 3\ncovariance = "diagonal"\n'
        "[metrics]\nprogress = false\n"
    )
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "raysfl.cli", "run", str(scenario), "--backend", "local", "--out", str(out)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, ctrl_c),
    )
    deadline = time.time() + 120
    while time.time() < deadline and not (out / "metrics.parquet").exists():
        time.sleep(0.5)
    time.sleep(3)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["stop_reason"] == "interrupted"
    return out, err


def test_ctrl_c_ends_cleanly_and_keeps_outputs(tmp_path):
    out, _ = _stopped_local_run(tmp_path, signal.SIGINT)
    assert pq.read_table(out / "metrics.parquet").num_rows >= 1
    assert pq.read_table(out / "events.parquet").num_rows > 0


@pytest.mark.parametrize("batch_job", [False, True])
def test_sigterm_ends_a_run_as_ctrl_c_does(tmp_path, batch_job):
    """SIGTERM (a scheduler's stop) killed a local run at once, without a summary. It now ends the run as
    Ctrl-C does, whether Ctrl-C is handled or ignored (a background job of a batch script)."""
    _stopped_local_run(tmp_path, signal.SIGTERM, signal.SIG_IGN if batch_job else signal.SIG_DFL)


class _SwallowsCtrlC:
    """A sink that gets a Ctrl-C at the second evaluation and swallows it, as Python does with a
    KeyboardInterrupt raised inside a finaliser ("Exception ignored in ...")."""

    def __init__(self) -> None:
        self.evals = 0

    def on_event(self, row) -> None:  # noqa: ANN001
        pass

    def on_eval(self, row) -> None:  # noqa: ANN001
        self.evals += 1
        if self.evals == 2:
            with contextlib.suppress(KeyboardInterrupt):
                signal.raise_signal(signal.SIGINT)

    def close(self) -> None:
        pass


def test_a_swallowed_ctrl_c_still_ends_the_run_at_the_next_event(tmp_path):
    """The SIGINT is remembered: the coordinator raises it again after the next event, so the run ends as
    interrupted instead of running on to its budget (a Ctrl-C test once saw a run compute on after it)."""
    long = {**TINY_GAS, "train": {**TINY_GAS["train"], "global_iterations": 40}}
    sink = _SwallowsCtrlC()
    # Python's own handler, as in a fresh `raysfl run`: a Ray Tune run earlier in this process leaves its
    # own installed (until a SIGINT comes), and the guard leaves a handler it did not expect alone
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        summary = run(scenario_from_dict(long), tmp_path / "out", backend="local", extra_sinks=[sink])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert summary["interrupted"] is True and summary["stop_reason"] == "interrupted"
    assert sink.evals == 2 and summary["global_iterations"] < 40


def _speeds(logdir: Path) -> list[tuple[int, float]]:
    acc = EventAccumulator(str(logdir))
    acc.Reload()
    return [(s.step, s.value) for s in acc.Scalars("speed/events_per_s")]


def test_tensorboard_speed_is_timed_when_reports_are_asked_for(tmp_path):
    """Evaluations that arrive together (on Ray) must not make a spike: the rate between two reports is
    their event counts over the wall time between the moments they were asked for."""
    from raysfl.metrics.tensorboard import TensorBoardSink

    sink = TensorBoardSink(tmp_path / "tb")
    asked = [(0, 1.0), (100, 3.0), (400, 5.0)]  # (events, wall s when asked)
    for events, wall in asked:
        sink.on_report({"iteration": 0, "t": 0.0, "events": events, "wall_s": wall})
    for i, (events, _) in enumerate(asked):  # all three arrive at wall 9 s, back to back
        row = {"iteration": i, "t": float(i), "bytes_up": 0, "bytes_down": 0, "events": events, "wall_s": 9.0}
        sink.on_eval(row)
    sink.writer.flush()
    assert _speeds(tmp_path / "tb") == [(1, 50.0), (2, 150.0)]  # 100 / 2 s, 300 / 2 s
    # a resumed run rewrites the file from the checkpoint's history: the same speeds
    state = sink.checkpoint(tmp_path, "x")
    evals = [
        {"iteration": i, "t": float(i), "bytes_up": 0, "bytes_down": 0, "events": e, "wall_s": 9.0}
        for i, (e, _) in enumerate(asked)
    ]
    sink.resume(state, evals)
    sink.writer.flush()
    assert _speeds(tmp_path / "tb") == [(1, 50.0), (2, 150.0)]
    sink.close()
