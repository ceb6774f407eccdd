"""The FedAvg peer benchmark (benchmarks/peers, issue 17): its scenario and its work match raysfl's.

Runs in the project's own venv, without Flower: the peer scenario is GAS Table 1's FedAvg cut to 10 rounds;
the shared work module draws raysfl's clients, partition and batches; the plain loop computes what raysfl
computes on a tiny scenario; the Flower script imports Flower only when it runs.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch

from raysfl.engine import runner
from raysfl.scenario import load_scenario, scenario_to_dict
from tests.conftest import on_sys_path

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / "benchmarks" / "peers"
TINY = (
    "data.dataset=synthetic",
    "data.synthetic_train=600",
    "data.synthetic_test=100",
    "model.alexnet_width_divisor=8",
    "federation.num_clients=5",
    "federation.active_clients=3",
    "train.global_iterations=3",
    "train.local_iterations=3",
    "train.batch_size=16",
    "metrics.progress=false",
    "metrics.tensorboard=false",
)


@pytest.fixture(scope="module")
def peers():
    """The benchmark's modules, imported as its scripts import each other (their folder on sys.path)."""
    with on_sys_path(PEERS):
        yield {
            name: importlib.import_module(name)
            for name in ("fedavg_work", "plain_fedavg", "flower_fedavg", "compute_bound")
        }


def test_peer_scenario_is_gas_table1_fedavg_cut_to_10_rounds(peers):
    fw = peers["fedavg_work"]
    sc = fw.load()
    ref = load_scenario(ROOT / "scenarios" / "gas" / "table1" / "fmnist_s2_fedavg.toml")
    assert (sc.algorithm.name, sc.params.aggregation) == ("fedavg", "data-size")
    assert (sc.data.dataset, sc.data.partition, sc.data.shards_per_client) == ("fashion-mnist", "shard", 2)
    assert (sc.model.name, sc.model.split) == ("alexnet", "L2")
    assert (sc.federation.num_clients, sc.federation.active_clients) == (20, 10)
    assert (sc.train.global_iterations, sc.train.local_iterations, sc.train.batch_size) == (10, 20, 32)
    assert (sc.train.optimizer, sc.train.lr, sc.train.momentum, sc.train.weight_decay) == (
        "sgd",
        0.01,
        0.9,
        5e-4,
    )
    assert (sc.engine.pools, sc.engine.torch_threads) == (2, 1)  # Flower's 2 actors x 1 CPU
    doc, ref_doc = scenario_to_dict(sc), scenario_to_dict(ref)
    for section in ("data", "model", "federation", "algorithm", "system"):
        assert doc[section] == ref_doc[section], section
    assert {**doc["train"], "global_iterations": 0} == {**ref_doc["train"], "global_iterations": 0}
    assert doc["seed"] == ref_doc["seed"]


def test_peer_work_refuses_what_the_peers_do_not_run(peers):
    fw = peers["fedavg_work"]
    with pytest.raises(ValueError, match="runs fedavg"):
        fw.load(None, ["algorithm.name=fedbuff"])
    with pytest.raises(ValueError, match="data-size"):
        fw.load(None, ["algorithm.params.aggregation=uniform"])
    with pytest.raises(ValueError, match="max_emulated_s"):
        fw.load(None, ["train.max_emulated_s=100"])


def test_flower_script_imports_flower_only_when_it_runs(peers):
    assert peers["flower_fedavg"].job_plan  # imported without Flower (not installed in the project's venv)
    assert "flwr" not in sys.modules
    for path in (ROOT / "raysfl").rglob("*.py"):
        text = path.read_text()
        assert "import flwr" not in text and "from flwr" not in text, path


def test_round_clients_and_partition_are_raysfls(peers, tmp_path):
    """The peers train the clients raysfl's FedAvg starts each round, on prepare's partition."""
    fw = peers["fedavg_work"]
    sc = fw.load(None, [*TINY, "train.global_iterations=4"])
    runner.run(sc, tmp_path / "run", backend="local")
    events = pq.read_table(tmp_path / "run" / "events.parquet").to_pylist()
    started: dict[int, list[int]] = {}
    for e in events:
        if e["kind"] == "start":
            started.setdefault(int(e["version"]), []).append(int(e["client"]))
    rounds = fw.round_clients(sc)
    assert [sorted(started[v]) for v in range(len(rounds))] == rounds
    assert len(rounds) == 4 and all(len(r) == 3 and len(set(r)) == 3 for r in rounds)
    work = fw.build(sc)
    prep = runner.prepare(sc)
    assert [list(ix) for ix in work.client_indices] == [list(ix) for ix in prep.setup.client_indices]
    plan = peers["flower_fedavg"].job_plan(sc)
    assert [[k for k, _ in r] for r in plan] == rounds
    done = {}
    for r in plan:
        for k, jobs in r:
            assert jobs == done.get(k, 0)
            done[k] = jobs + 1


def test_a_replayed_client_continues_its_batch_order(peers):
    """A process that meets client k after k's first job elsewhere trains k's second job identically."""
    fw = peers["fedavg_work"]
    sc = fw.load(None, TINY)
    work = fw.build(sc)
    w0 = work.initial_weights()
    here = fw.Trainer(work)
    w1 = here.train(2, w0, 0)
    w2 = here.train(2, w1, 1)
    elsewhere = fw.Trainer(fw.build(sc))
    again = elsewhere.train(2, w1, 1)
    assert elsewhere.replayed_batches == sc.train.local_iterations and here.replayed_batches == 0
    assert all(torch.equal(again[k], w2[k]) for k in w2)


@pytest.mark.parametrize("memory_format", ["contiguous", "channels_last"])
def test_plain_loop_does_raysfls_work(peers, tmp_path, memory_format):
    """Same rounds, clients, batches, optimizer and aggregation: the plain loop's accuracy is raysfl's; with
    ``engine.memory_format = "channels_last"`` the peers' model is channels-last as raysfl's is."""
    fw, plain = peers["fedavg_work"], peers["plain_fedavg"]
    tiny = (*TINY, f"engine.memory_format={memory_format}")
    sc = fw.load(None, tiny)
    conv = fw.build(sc).model.client.conv2.weight  # conv1 has one input channel: both layouts at once
    assert conv.is_contiguous(memory_format=torch.channels_last) == (memory_format == "channels_last")
    summary = runner.run(sc, tmp_path / "run", backend="local")
    metrics = pq.read_table(tmp_path / "run" / "metrics.parquet").to_pylist()
    threads = torch.get_num_threads()
    try:
        row = plain.run(tiny, threads=sc.engine.torch_threads)
    finally:
        torch.set_num_threads(threads)
    assert row["rounds"] == sc.train.global_iterations == summary["global_iterations"]
    assert row["accuracy"] == pytest.approx(summary["final_accuracy"], abs=1e-9)
    assert [m["iteration"] for m in metrics] == fw.evaluated_rounds(sc) == [0, 1, 2, 3]
    assert row["startup_s"] > 0 and row["per_round_s"] > 0 and row["total_s"] >= row["startup_s"]
    text = fw.table([row])
    assert text.splitlines()[0] == "| " + " | ".join(fw.COLUMNS) + " |"
    assert text.splitlines()[2].startswith("| plain loop (1 process) | ")
    assert not math.isnan(row["per_round_s"])


def test_raysfl_side_reads_the_first_pool_task_from_rays_timeline(peers):
    with on_sys_path(PEERS):
        side = importlib.import_module("raysfl_fedavg")
    events = [
        {"cat": "task::Server.call", "ts": 1.0e6},
        {"cat": "task::ClientPool.call", "ts": 3.5e6, "dur": 1.0},
        {"cat": "task::ClientPool.call", "ts": 2.5e6, "dur": 1.0},
        {"cat": "task::ClientPool.node_id", "ts": 2.0e6},
        {"cat": "task:execute", "ts": 0.5e6},
    ]
    assert side.first_pool_task_start(events) == 2.5
    # a roaming client's job (engine.placement = "least-loaded") is a call_carried task
    events.append({"cat": "task::ClientPool.call_carried", "ts": 2.25e6, "dur": 1.0})
    assert side.first_pool_task_start(events) == 2.25
    assert side.first_pool_task_start([]) is None


def test_run_all_runs_the_chosen_systems_into_one_table(tmp_path):
    """The driver launches each system in its own process with RAYSFL_PEER_T0 and prints one table."""
    import subprocess

    cmd = [
        sys.executable,
        str(PEERS / "run_all.py"),
        *TINY,
        "train.global_iterations=1",
        "--only",
        "raysfl,plain",
    ]
    done = subprocess.run([*cmd, "--logs", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 4 and lines[3].startswith("| plain loop (1 process) | ")
    # raysfl on its own embedded Ray, 2 pools with roaming clients: the first job is timed from Ray's timeline
    assert lines[2].startswith("| raysfl (Ray, 2 pools x 1 thread) | ") and "failed" not in lines[2]
    assert (tmp_path / "plain.json").is_file() and (tmp_path / "plain.log").is_file()
    assert json.loads((tmp_path / "raysfl.json").read_text())["startup_s"] > 0
    bad = subprocess.run([*cmd[:-1], "dask"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown systems ['dask']" in bad.stderr


def test_flower_venv_set_up_installs_raysfls_requirements_less_ray():
    """README.md installs raysfl with --no-deps beside flwr (whose Ray pin is below raysfl's floor), so the
    requirements it quotes must be pyproject.toml's, less Ray: a new dependency of raysfl goes there too."""
    import re
    import tomllib

    readme = (PEERS / "README.md").read_text()
    block = readme[readme.index("python3 -m venv /tmp/flower-venv") :]
    block = block[: block.index("```")]
    quoted = set(re.findall(r'"([^"]+)"', block)) - {"flwr[simulation]"}
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert quoted == {d for d in declared if not d.startswith("ray")}
    assert "pip install --no-deps -e ." in block


def test_compute_bound_times_every_pass_of_the_plain_loops_work(peers):
    """One thread, every job and evaluation of the run timed; the bound is their CPU time over the cores,
    and the work is the plain loop's (the same final accuracy with the same thread count)."""
    bound, plain = peers["compute_bound"], peers["plain_fedavg"]
    threads = torch.get_num_threads()
    try:
        m = bound.measure(TINY)
        row = plain.run(TINY, threads=1)
    finally:
        torch.set_num_threads(threads)
    assert [(r, k) for r, k, _ in m["jobs"]] == [
        (r, k)
        for r, clients in enumerate(peers["fedavg_work"].round_clients(bound.fw.load(None, TINY)), 1)
        for k in clients
    ]
    assert len(m["jobs"]) == 3 * 3 and len(m["evals"]) == 4 and m["flush"] is False
    assert m["accuracy"] == row["accuracy"]
    m = {**m, "jobs": [(1, 0, 1.0), (1, 1, 1.0), (2, 2, 5.0)], "evals": [0.5, 0.5]}
    text = bound.table(m, cores=2, target=3.0)
    assert "| **compute bound on 2 cores (s)** | **4.0** |" in text  # (1 + 1 + 5 + 0.5 + 0.5) / 2
    assert "| target 3.0 s | below the bound: no system can reach it (-1.0 s) |" in text
    assert text.endswith("Jobs over twice the median: round 2 client 2: 5.00 s")
