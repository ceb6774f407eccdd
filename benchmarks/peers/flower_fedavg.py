"""The Flower side of the FedAvg peer benchmark: the peer scenario's work on Flower's simulation engine.

Runs in its own virtualenv with ``flwr[simulation]`` and raysfl installed (README.md beside this file); raysfl
never imports Flower, only this script does. The work is the one ``fedavg_work`` builds from
``scenarios/bench/fedavg_peer.toml`` and the ``key=value`` overrides, so it matches raysfl's run:

* K supernodes (``federation.num_clients``) on the Ray backend, ``--actors`` actors of ``--cpus`` CPUs each
  (default 2 × 1), on a Ray started for this run alone (its own temporary folder and namespace), stopped at
  the end;
* the ServerApp runs Flower's own ``FedAvg`` strategy (its ``start`` loop and its weighted aggregation by
  the ``num-examples`` each reply reports, |D_k| here) for ``train.global_iterations`` rounds, with a
  centralised ``evaluate_fn`` (raysfl's test-set evaluation) before round 1 and after every round that raysfl
  evaluates; no federated evaluation;
* only FedAvg's sampling (its ``configure_train``) is replaced: each round trains the C clients that
  raysfl's FedAvg draws (``fedavg_work.round_clients``); the i-th supernode (node ids in ascending order)
  serves client i, and the message tells it which job of that client this is, so the ClientApp, on whichever
  actor it runs, continues the client's minibatch order exactly (``fedavg_work.Trainer``);
* the ClientApp trains with raysfl's ``FLClient.train`` (E SGD steps of B samples) using ``--cpus`` torch
  threads; each actor loads the data and builds the model once, on its first message.

Timings (``fedavg_work``): the first round starts when the first ClientApp of round 1 starts training (the
time it reports back); the last evaluation ends when ``evaluate_fn`` returns for the last round.

Usage (prints a one-row markdown table):
    /tmp/flower-venv/bin/python benchmarks/peers/flower_fedavg.py [key=value ...] [--actors 2] [--cpus 1]
        [--data-dir DIR] [--result FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import fedavg_work as fw

NAMESPACE = "raysfl-peer-flower"


def job_plan(sc: Any) -> list[list[tuple[int, int]]]:
    """Each round's (client, jobs that client has done before) pairs, from raysfl's client draws."""
    done = [0] * sc.federation.num_clients
    plan = []
    for clients in fw.round_clients(sc):
        plan.append([(k, done[k]) for k in clients])
        for k in clients:
            done[k] += 1
    return plan


def make_client_app(
    scenario: str | None, overrides: Sequence[str], data_dir: str | None, threads: int
) -> Any:
    """The ClientApp: one raysfl client job per train message."""
    from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp

    key = ("flower-trainer", scenario, tuple(overrides), data_dir, threads)
    app = ClientApp()

    def trainer() -> fw.Trainer:
        return fw.Trainer(fw.build(fw.load(scenario, overrides), data_dir), threads=threads)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        t = fw.cached(key, trainer)
        config = msg.content["config"]
        k, jobs = int(config["client"]), int(config["jobs"])
        weights = msg.content["arrays"].to_torch_state_dict()
        start = time.time()
        trained = t.train(k, weights, jobs)
        metrics = MetricRecord({"num-examples": t.work.client_size(k), "t-start": start})
        return Message(RecordDict({"arrays": ArrayRecord(trained), "metrics": metrics}), reply_to=msg)

    return app


def make_server_app(sc: Any, data_dir: str | None, timing: dict[str, Any]) -> Any:
    """The ServerApp: Flower's FedAvg with raysfl's clients per round and a centralised evaluation."""
    from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict
    from flwr.serverapp import Grid, ServerApp
    from flwr.serverapp.strategy import FedAvg

    plan = job_plan(sc)
    rounds = sc.train.global_iterations
    due = set(fw.evaluated_rounds(sc))

    class RaysflRounds(FedAvg):
        """Flower's FedAvg whose round r trains raysfl's round-r clients, the i-th node serving client i."""

        def configure_train(
            self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
        ) -> list[Message]:
            nodes = sorted(grid.get_node_ids())
            while len(nodes) < sc.federation.num_clients:  # the simulation registers every node first
                time.sleep(0.1)
                nodes = sorted(grid.get_node_ids())
            messages = []
            for k, jobs in plan[server_round - 1]:
                cfg = ConfigRecord({**dict(config), "server-round": server_round, "client": k, "jobs": jobs})
                content = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: cfg})
                messages.append(
                    Message(content=content, message_type=MessageType.TRAIN, dst_node_id=nodes[k])
                )
            return messages

        def aggregate_train(self, server_round: int, replies: Any) -> Any:
            replies = list(replies)
            if len(replies) != len(plan[server_round - 1]) or any(m.has_error() for m in replies):
                errors = [m.error.reason for m in replies if m.has_error()]
                raise RuntimeError(f"round {server_round}: {len(replies)} replies, errors: {errors}")
            if server_round == 1:
                timing["first_round_start"] = min(float(m.content["metrics"]["t-start"]) for m in replies)
            return super().aggregate_train(server_round, replies)

    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        work = fw.build(sc, data_dir)
        evaluator = fw.Evaluator(work)

        def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
            if server_round not in due:
                return None
            accuracy, loss = evaluator(arrays.to_torch_state_dict())
            timing.update(accuracy=accuracy, loss=loss, last_eval_end=time.time())
            return MetricRecord({"accuracy": accuracy, "loss": loss})

        strategy = RaysflRounds(fraction_evaluate=0.0)
        strategy.start(grid, ArrayRecord(work.initial_weights()), num_rounds=rounds, evaluate_fn=evaluate)

    return app


def run(
    overrides: Sequence[str] = (),
    scenario: str | None = None,
    data_dir: str | None = None,
    actors: int = 2,
    cpus: int = 1,
) -> dict[str, Any]:
    """Run the peer scenario on Flower's simulation engine; returns the result row."""
    import flwr
    import ray
    from flwr.simulation import run_simulation

    import raysfl

    if Path(raysfl.__file__).resolve().parents[1] != fw.ROOT:  # the venv's raysfl is another checkout's
        print(f"flower_fedavg: warning: raysfl comes from {raysfl.__file__}, not {fw.ROOT}", file=sys.stderr)
    os.environ.pop("RAY_ADDRESS", None)  # never join another Ray (a background run's): start our own
    sc = fw.load(scenario, overrides)
    timing: dict[str, Any] = {}
    temp = tempfile.mkdtemp(prefix="rayflwr-", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    backend = {
        "client_resources": {"num_cpus": cpus, "num_gpus": 0.0},
        "init_args": {
            "num_cpus": actors * cpus,
            "num_gpus": 0,
            "namespace": NAMESPACE,
            "_temp_dir": temp,
            "include_dashboard": False,
        },
    }
    try:
        run_simulation(
            server_app=make_server_app(sc, data_dir, timing),
            client_app=make_client_app(scenario, overrides, data_dir, cpus),
            num_supernodes=sc.federation.num_clients,
            backend_name="ray",
            backend_config=backend,
        )
    finally:
        if ray.is_initialized():  # Flower's Ray backend stops Ray itself; make sure of it
            ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
    if "first_round_start" not in timing or "last_eval_end" not in timing:
        raise RuntimeError(f"the simulation did not finish its rounds (timings: {sorted(timing)})")
    return fw.result(
        f"Flower {flwr.__version__} (Ray, {actors} actors x {cpus} CPU)",
        timing["first_round_start"],
        timing["last_eval_end"],
        timing.get("accuracy"),
        sc.train.global_iterations,
        loss=timing.get("loss"),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    fw.add_arguments(parser)
    parser.add_argument("--actors", type=int, default=2, help="Ray actors running ClientApps (default 2)")
    parser.add_argument("--cpus", type=int, default=1, help="CPUs (and torch threads) per actor (default 1)")
    args = parser.parse_args(argv)
    row = run(args.overrides, args.scenario, args.data_dir, args.actors, args.cpus)
    fw.report(row, args.result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
