"""Checkpoint and resume: a run continued from a checkpoint ends exactly like an uninterrupted one."""

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raysfl.algorithms import ALGORITHMS
from raysfl.cli import main
from raysfl.config import apply_overrides
from raysfl.engine import runner
from raysfl.engine.checkpoint import CheckpointError
from raysfl.methods import resolve
from raysfl.scenario import scenario_from_dict

ROOT = Path(__file__).resolve().parents[3]
# every registered method, and a method that lives outside raysfl (named by its import path)
METHODS = [*sorted(ALGORITHMS), "examples.fedasync_hinge.method:SPEC"]


def torch_sees_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def tiny(name: str, **engine) -> dict:
    """A tiny run of ``name``, with what the method says a small run needs (``AlgorithmSpec.smoke``)."""
    doc = {
        "name": f"ck-{name.partition(':')[0].rpartition('.')[2]}",
        "seed": 3,
        "data": {"dataset": "synthetic", "partition": "iid", "synthetic_train": 300, "synthetic_test": 60},
        "model": {"name": "lenet5"},
        "federation": {"num_clients": 5, "active_clients": 3},
        "train": {"global_iterations": 4, "local_iterations": 2, "batch_size": 16},
        "algorithm": {"name": name},
        "metrics": {"progress": False, "tensorboard": name == "gas"},
        "engine": {"checkpoint_every": 2, "keep_checkpoints": 10, **engine},
    }
    return apply_overrides(doc, resolve(name).smoke)


def rows(path: Path, drop=("wall_s",)) -> list[dict]:
    """Parquet rows without wall-clock columns; NaN made comparable."""
    table = pq.read_table(path)
    table = table.drop([c for c in drop if c in table.column_names])
    return [
        {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()}
        for r in table.to_pylist()
    ]


def crash_after(run_dir: Path, copy: Path, checkpoint: str) -> Path:
    """What a run killed just after ``checkpoint`` leaves: later checkpoints and the summary never written."""
    shutil.copytree(run_dir, copy)
    for ck in (copy / "checkpoints").glob("ckpt-*.pt"):
        if ck.name > checkpoint:
            ck.unlink()
    (copy / "summary.json").unlink()
    return copy


def run_crash_and_resume(sc, tmp_path: Path) -> tuple[dict, list[str]]:
    """Run ``sc``, crash a copy after its first checkpoint, resume it: the same metrics and events."""
    full = runner.run(sc, tmp_path / "full", backend="local")
    cks = sorted(p.name for p in (tmp_path / "full" / "checkpoints").glob("ckpt-*.pt"))
    assert cks[0] == "ckpt-000002.pt", cks
    crashed = crash_after(tmp_path / "full", tmp_path / "crashed", cks[0])
    resumed = runner.run(sc, crashed, backend="local", resume=True)
    assert resumed["resumed_from"] == "ckpt-000002.pt"
    assert rows(crashed / "metrics.parquet") == rows(tmp_path / "full" / "metrics.parquet")
    assert rows(crashed / "events.parquet") == rows(tmp_path / "full" / "events.parquet")
    assert resumed["final_accuracy"] == full["final_accuracy"] and resumed["events"] == full["events"]
    assert resumed["bytes_up"] == full["bytes_up"] and resumed["bytes_down"] == full["bytes_down"]
    return full, cks


@pytest.mark.parametrize("name", METHODS)
def test_every_method_resumes_to_the_same_metrics_and_events(name, tmp_path):
    sc = scenario_from_dict(tiny(name))
    full, cks = run_crash_and_resume(sc, tmp_path)

    # killed after its final checkpoint (taken at the event that used up the budget), before summary.json:
    # the resumed run ends there too, exactly as the uninterrupted one, without an iteration T + 1
    assert cks[-1] == "ckpt-000004.pt", cks
    late = crash_after(tmp_path / "full", tmp_path / "late", cks[-1])
    again = runner.run(sc, late, backend="local", resume=True)
    assert again["resumed_from"] == cks[-1]
    assert rows(late / "metrics.parquet") == rows(tmp_path / "full" / "metrics.parquet")
    assert rows(late / "events.parquet") == rows(tmp_path / "full" / "events.parquet")
    same = ("global_iterations", "final_accuracy", "events", "bytes_up", "bytes_down", "stop_reason")
    assert {k: again[k] for k in same} == {k: full[k] for k in same}

    # a finished run resumes to a no-op: same summary, every output file byte for byte as it was
    before = files(tmp_path / "full")
    noop = runner.run(sc, tmp_path / "full", backend="local", resume=True)
    assert files(tmp_path / "full") == before
    assert noop == json.loads(before[tmp_path / "full" / "summary.json"])


def test_gas_low_rank_sampler_resumes_to_the_same_metrics_and_events(tmp_path):
    """The sampler's rows, factors and ridge masses are run state: with 40 rows a label, this run folds 15
    times over its 4 iterations (counted once), so the checkpoint at iteration 2 holds folded labels and
    labels with rows, and the resumed run folds again afterwards."""
    doc = apply_overrides(
        tiny("gas"),
        [
            'algorithm.params.covariance="full"',
            'algorithm.params.sampler="low-rank"',
            "algorithm.params.low_rank_rows=40",
            "metrics.tensorboard=false",
        ],
    )
    run_crash_and_resume(scenario_from_dict(doc), tmp_path)


def files(run_dir: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def test_resuming_a_finished_run_from_the_command_line_says_so_and_changes_nothing(tmp_path, capsys):
    sc = scenario_from_dict(tiny("fedasync"))
    runner.run(sc, tmp_path / "run", backend="local")
    before = files(tmp_path / "run")
    assert main(["run", "--resume", str(tmp_path / "run"), "--backend", "local"]) == 0
    out, err = capsys.readouterr()
    assert f"raysfl: {tmp_path / 'run'} has finished (budget reached); nothing to resume" in err
    assert "done: ck-fedasync" in out
    assert files(tmp_path / "run") == before
    # --out naming another directory was ignored silently; the same directory is fine
    other = tmp_path / "elsewhere"
    assert main(["run", "--resume", str(tmp_path / "run"), "--out", str(other), "--backend", "local"]) == 2
    assert f"--out {other} names another (leave --out out)" in capsys.readouterr().err
    assert not other.exists()
    argv = ["run", "--resume", str(tmp_path / "run"), "--out", str(tmp_path / "run"), "--backend", "local"]
    assert main(argv) == 0


def test_a_resumed_runs_wall_time_goes_on_from_its_checkpoint(tmp_path):
    """wall_s restarted at 0 on resume (metrics went backwards; the summary held the last attempt only)."""
    import torch

    sc = scenario_from_dict(tiny("fedasync"))
    runner.run(sc, tmp_path / "full", backend="local")
    crashed = crash_after(tmp_path / "full", tmp_path / "crashed", "ckpt-000002.pt")
    from raysfl.engine.snapshot import rebuild

    ck = torch.load(crashed / "checkpoints" / "ckpt-000002.pt", weights_only=True)
    before = float(ck["wall_s"])
    kept = [r["wall_s"] for r in rebuild(ck["totals"]).evals]
    assert 0 < kept[-1] <= before  # the checkpoint follows its evaluations
    resumed = runner.run(sc, crashed, backend="local", resume=True)
    walls = [r["wall_s"] for r in pq.read_table(crashed / "metrics.parquet").to_pylist()]
    assert walls[: len(kept)] == kept and len(walls) > len(kept)
    assert all(b >= a for a, b in zip(walls, walls[1:], strict=False)) and walls[len(kept)] > before
    assert resumed["wall_s"] >= walls[-1] > before
    assert resumed["events_per_s"] == pytest.approx(resumed["events"] / resumed["wall_s"])


def test_tensorboard_is_rewritten_without_the_crashed_attempts_tail(tmp_path, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    sc = scenario_from_dict(tiny("gas"))
    runner.run(sc, tmp_path / "full", backend="local")
    crashed = crash_after(tmp_path / "full", tmp_path / "crashed", "ckpt-000002.pt")
    monkeypatch.setattr(runner, "source_commit", lambda: "the-resuming-checkout")  # resumed by newer code
    runner.run(sc, crashed, backend="local", resume=True)

    def scalars(run: Path) -> dict:
        acc = EventAccumulator(str(run / "tb")).Reload()
        return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}

    full, again = scalars(tmp_path / "full"), scalars(crashed)
    assert len(list((crashed / "tb").glob("events.out.tfevents.*"))) == 1
    acc = EventAccumulator(str(crashed / "tb")).Reload()
    (text,) = acc.Tensors("config/text_summary")  # the configuration is written again, once: config.toml's
    assert "the-resuming-checkout" not in text.tensor_proto.string_val[0].decode()
    assert "the-resuming-checkout" not in (crashed / "config.toml").read_text()
    assert "_hparams_/session_start_info" in acc.PluginTagToContent("hparams")
    for tag in ("test/accuracy", "test/loss", "comm/bytes_up", "time/emulated_s"):
        assert again[tag] == full[tag], tag


def test_resume_refuses_another_scenario_and_leaves_the_run_untouched(tmp_path, capsys):
    sc = scenario_from_dict(tiny("fedavg"))
    runner.run(sc, tmp_path / "run", backend="local")
    before = {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()}
    other = tmp_path / "other.toml"
    other.write_text(
        '[data]\ndataset = "synthetic"\npartition = "iid"\n[model]\nname = "lenet5"\n'
        '[algorithm]\nname = "fedavg"\n[federation]\nnum_clients = 7\nactive_clients = 3\n'
    )
    code = main(["run", str(other), "--resume", str(tmp_path / "run"), "--backend", "local"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "written by another scenario" in err and "federation.num_clients: 5 != 7" in err
    assert "raysfl run --resume RUN_DIR" in err
    assert before == {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()}

    # a run directory without checkpoints, and a fresh run into an existing directory
    plain = scenario_from_dict({**tiny("fedavg"), "engine": {}})
    runner.run(plain, tmp_path / "plain", backend="local")
    with pytest.raises(CheckpointError, match="it finished .budget reached.; there is nothing to resume"):
        runner.run(plain, tmp_path / "plain", backend="local", resume=True)
    (tmp_path / "plain" / "summary.json").unlink()  # as if killed
    with pytest.raises(CheckpointError, match="engine.checkpoint_every > 0"):
        runner.run(plain, tmp_path / "plain", backend="local", resume=True)
    with pytest.raises(CheckpointError, match="no such run directory"):
        runner.run(plain, tmp_path / "nowhere", backend="local", resume=True)
    with pytest.raises(CheckpointError, match="already holds a resumable run"):
        runner.run(sc, tmp_path / "run", backend="local")
    assert before == {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("switch", "value", "says"),
    [("events", "false", "keep rows past"), ("tensorboard", "true", "miss what came before")],
)
def test_resume_refuses_to_switch_a_log_on_or_off(tmp_path, capsys, switch, value, says):
    """metrics.* may change on resume, but a log switched on would lack the rows before the checkpoint, and
    one switched off would keep the crashed attempt's rows past it: both were accepted silently."""
    sc = scenario_from_dict(tiny("fedavg"))  # events on, TensorBoard off
    runner.run(sc, tmp_path / "full", backend="local")
    crashed = crash_after(tmp_path / "full", tmp_path / "crashed", "ckpt-000002.pt")
    before = {p: p.read_bytes() for p in crashed.rglob("*") if p.is_file()}
    code = main(["run", "--resume", str(crashed), f"metrics.{switch}={value}", "--backend", "local"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"metrics.{switch}: " in err and f"ckpt-000002.pt was written with metrics.{switch} = " in err
    assert says in err and "Resume without that override" in err
    assert before == {p: p.read_bytes() for p in crashed.rglob("*") if p.is_file()}
    assert main(["run", "--resume", str(crashed), "metrics.progress=true", "--backend", "local"]) == 0


def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(tmp_path, capsys):
    sc = scenario_from_dict(tiny("fedbuff"))
    runner.run(sc, tmp_path / "full", backend="local")
    crashed = crash_after(tmp_path / "full", tmp_path / "crashed", "ckpt-000004.pt")
    newest = crashed / "checkpoints" / "ckpt-000004.pt"
    newest.write_bytes(newest.read_bytes()[:1000])  # torn write of a file system that lies about fsync
    capsys.readouterr()
    resumed = runner.run(sc, crashed, backend="local", resume=True)
    assert resumed["resumed_from"] == "ckpt-000002.pt"
    assert rows(crashed / "metrics.parquet") == rows(tmp_path / "full" / "metrics.parquet")
    err = capsys.readouterr().err  # the fall-back is said: which file is damaged, which one is used
    assert "passing over damaged checkpoint(s)" in err and "ckpt-000004.pt: RuntimeError:" in err
    assert "resuming from ckpt-000002.pt" in err


def test_an_unreadable_checkpoint_is_reported_without_torchs_advice_to_load_it_unsafely(tmp_path, capsys):
    sc = scenario_from_dict(tiny("fedavg"))
    runner.run(sc, tmp_path / "run", backend="local")
    crashed = crash_after(tmp_path / "run", tmp_path / "crashed", "ckpt-000004.pt")
    for ck in (crashed / "checkpoints").glob("ckpt-*.pt"):
        ck.write_bytes(
            b"\x80\x02}q\x00X\x01\x00\x00\x00tq\x01cnot_a_module\nthing\nq\x02s."
        )  # a plain pickle
    assert main(["run", "--resume", str(crashed), "--backend", "local"]) == 2
    err = capsys.readouterr().err
    assert "ckpt-000004.pt" in err and "Traceback" not in err
    for advice in ("weights_only", "safe_globals", "trust", "\x1b["):
        assert advice not in err, advice


def test_the_scenario_is_stored_before_the_first_checkpoint(tmp_path, monkeypatch):
    """``checkpoints/scenario.toml`` was written after ``ckpt-*.pt``: a process killed between the two (seen
    under load) left a checkpoint that ``--resume`` could not use without the scenario file."""
    from raysfl.engine import checkpoint

    saved = []

    def save_tree(tree, path):
        saved.append((path.name, (path.parent / checkpoint.SCENARIO_FILE).is_file()))
        return original(tree, path)

    original = checkpoint.save_tree
    monkeypatch.setattr(checkpoint, "save_tree", save_tree)
    runner.run(scenario_from_dict(tiny("fedavg")), tmp_path / "run", backend="local")
    assert saved and all(stored for _, stored in saved), saved


@pytest.mark.slow
def test_killed_process_resumes_from_the_command_line(tmp_path):
    """SIGKILL a real ``raysfl run`` after its first checkpoint, ``--resume`` it, compare with a clean run."""
    doc = tiny("gas")
    doc["train"] = {"global_iterations": 8, "local_iterations": 3, "batch_size": 16}
    doc["engine"] = {"checkpoint_every": 2}
    scenario = tmp_path / "gas.toml"
    from raysfl.config import dumps_toml

    scenario.write_text(dumps_toml(doc))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cli = [sys.executable, "-m", "raysfl.cli", "run", "--backend", "local"]
    subprocess.run([*cli, str(scenario), "--out", str(tmp_path / "clean")], check=True, env=env, cwd=ROOT)

    victim = tmp_path / "victim"
    proc = subprocess.Popen([*cli, str(scenario), "--out", str(victim)], env=env, cwd=ROOT)
    deadline = time.monotonic() + 120
    while not list((victim / "checkpoints").glob("ckpt-*.pt")) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (victim / "summary.json").exists(), "the run finished before it could be killed"

    resumed = subprocess.run(
        [*cli, "--resume", str(victim)], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr
    assert rows(victim / "metrics.parquet") == rows(tmp_path / "clean" / "metrics.parquet")
    assert rows(victim / "events.parquet") == rows(tmp_path / "clean" / "events.parquet")
    summary = json.loads((victim / "summary.json").read_text())
    assert summary["resumed_from"].startswith("ckpt-")


def test_deferred_jobs_and_urgent_requests_resume_identically(tmp_path):
    """PORT with urgent requests: checkpoints hold deferred jobs (their models' bases in slots) and the
    superseded model event of a job that reported early; the resumed run ignores it exactly as the
    uninterrupted one."""
    trace = tmp_path / "devices.csv"
    trace.write_text(
        "client,flops_per_s,uplink_bps,downlink_bps\n"
        + "".join(f"{k},{f},1,1\n" for k, f in enumerate((1e10, 1e10, 1e10, 1e8)))
    )
    base = tiny("port")
    base["federation"] = {"num_clients": 4, "active_clients": 4}
    base["train"] = {**base["train"], "global_iterations": 20, "local_iterations": 4}
    base["algorithm"] = {"name": "port", "params": {"buffer_size": 1, "staleness_bound": 2}}
    base["system"] = {
        "compute": {"kind": "trace"},
        "link": {"kind": "fixed", "uplink_bps": 1e9, "downlink_bps": 1e9},
        "trace_file": str(trace),
    }
    sc = scenario_from_dict(base)
    runner.run(sc, tmp_path / "full", backend="local")
    events = rows(tmp_path / "full" / "events.parquet")
    requested = [e for e in events if e["kind"] == "request"]
    assert requested, "no urgent request: the scenario no longer exercises the deferred path"
    first_reply = min(
        e["t"] for e in events if e["kind"] == "model" and e["t"] > requested[0]["t"] and e["client"] == 3
    )
    later = [e["version"] for e in events if e["kind"] == "model" and e["t"] >= first_reply]
    ck = f"ckpt-{(max(later) // 2) * 2:06d}.pt"  # taken after the reply: a superseded event is queued
    crashed = crash_after(tmp_path / "full", tmp_path / "crashed", ck)
    resumed = runner.run(sc, crashed, backend="local", resume=True)
    assert resumed["resumed_from"] == ck
    assert rows(crashed / "events.parquet") == events
    assert rows(crashed / "metrics.parquet") == rows(tmp_path / "full" / "metrics.parquet")


def test_resume_without_backend_continues_on_the_backend_the_run_was_made_with(tmp_path, capsys, monkeypatch):
    """`raysfl run --resume DIR` started Ray for a run made with --backend local. A $RAY_ADDRESS that answers
    nothing makes a Ray resume fail at once, so the resume's success shows it ran without Ray."""
    from raysfl.cli import _run_backend, build_parser

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")

    sc = scenario_from_dict(tiny("fedavg"))
    runner.run(sc, tmp_path / "full", backend="local")
    crashed = crash_after(tmp_path / "full", tmp_path / "crashed", "ckpt-000002.pt")
    capsys.readouterr()
    assert main(["run", "--resume", str(crashed)]) == 0
    assert f"resuming {crashed} on the local backend it was made with" in capsys.readouterr().err
    assert rows(crashed / "metrics.parquet") == rows(tmp_path / "full" / "metrics.parquet")
    parse = build_parser().parse_args
    assert _run_backend(parse(["run", "--resume", str(crashed), "--backend", "ray"])) == "ray"
    assert _run_backend(parse(["run", "--resume", str(crashed), "--address", "auto"])) == "ray"
    assert _run_backend(parse(["run", "x.toml"])) == "ray"
    (crashed / "config.toml").write_text(
        (crashed / "config.toml").read_text().replace('backend = "local"', 'backend = "ray"')
    )
    assert _run_backend(parse(["run", "--resume", str(crashed)])) == "ray"


@pytest.mark.skipif(torch_sees_gpu(), reason="a GPU here would let the resume keep the GPU it asks for")
def test_a_resume_keeps_the_servers_device_or_says_why_it_cannot(tmp_path, capsys):
    """Under engine.server_device = "auto" a run whose server computed on a GPU resumes on one or not at
    all (a CPU's last bits differ); engine.server_device = "cpu" continues it on the CPU by choice."""
    import torch

    from raysfl.engine.snapshot import save_tree

    sc = scenario_from_dict(tiny("fedavg"))
    runner.run(sc, tmp_path / "full", backend="local")
    recorded = torch.load(tmp_path / "full" / "checkpoints" / "ckpt-000002.pt", weights_only=True)
    assert recorded["server_device"] == "cpu"
    crashed = crash_after(tmp_path / "full", tmp_path / "crashed", "ckpt-000002.pt")
    path = crashed / "checkpoints" / "ckpt-000002.pt"
    save_tree({**recorded, "server_device": "cuda:0"}, path)  # as a run whose server had a GPU wrote it
    capsys.readouterr()
    assert main(["run", "--resume", str(crashed), "--backend", "local"]) == 2
    err = capsys.readouterr().err
    assert "engine.server_device: 'auto' resumes" in err and "a GPU (ckpt-000002.pt)" in err
    assert 'add engine.server_device="cpu"' in err and "Traceback" not in err
    assert not (crashed / "summary.json").exists()
    assert main(["run", "--resume", str(crashed), "--backend", "local", "engine.server_device=cpu"]) == 0
    assert rows(crashed / "metrics.parquet") == rows(tmp_path / "full" / "metrics.parquet")
