"""CSE-FSL: why the server learns more from Algorithm 1's upload than from the authors' code's.

The two readings of the upload differ by one client step: the code uploads the forward pass's activations
x_c^(m)(z_m) of the window's last batch, before that batch's update; Algorithm 1 (lines 8–12) updates the
client, then uploads x_c^(m+1)(z_m). At h = 25 the second gives a 2–4 points more accurate server
(benchmarks/REPRODUCTION.md, "CSE-FSL (a)"). Two explanations are possible:

- *freshness*: activations one step newer are closer to the client model that the server meets at test time;
- *fit*: x_c^(m+1) has just taken a step on (z_m, y_m) through the auxiliary head, so its activations of that
  very batch separate the batch's labels better than those of any batch the client has not just fitted.

The client side of CSE-FSL never depends on the server (local loss, no gradient download), so one client
trajectory can feed several server models at once, each with another kind of upload, and differ in nothing
else. This script trains every client once and, at each upload, hands three server models (each an
:class:`~raysfl.algorithms.common.fsl_server.FSLServer`) one of:

    forward    x_c^(m)(z_m): the authors' code [C] (``recompute_after_update = false``)
    updated    x_c^(m+1)(z_m): Algorithm 1 [P] (``recompute_after_update = true``)
    unseen     x_c^(m+1)(z'): the updated client on a batch z' of the same client's data, drawn from a stream
               of its own and not just trained on: as fresh as ``updated``, not fitted (the control)

If ``unseen`` learns like ``forward``, freshness is not what helps; if like ``updated``, it is.
At every upload it also records each kind's local loss and accuracy on its labels (how well the activations
separate them) under the auxiliary head of the same client step (the step's own loss for ``forward``, the
updated head for the other two), and each server's loss on its own uploads.

The uploads are served in the authors' code's order (``server_order = "round_robin"``: window 0 of every
client, then window 1, ...); the engine's default serves them in emulated arrival order. The client models
are averaged in client order, where the engine averages them in the order they arrive: from round 2 on the
clients start from averages that differ in the last bits, so this loop's numbers pair with each other, not
with the engine's runs (the auxiliary head's accuracy, which only the clients decide, ends 0.1–0.3 points
off the engine's after 8 epochs of CIFAR-10, as a change of processor moves it).
``--check`` runs the engine (local backend) for one round with ``round_robin`` and both readings, and
requires its accuracies to equal the ``forward`` and ``updated`` servers' exactly up to that first average.

Usage:
    RAYSFL_DATA=../shared/data python benchmarks/cse_fsl_upload_freshness.py \
        scenarios/cse_fsl/table5/cifar10_iid_cse_fsl_h5_quick.toml \
        train.global_iterations=8 algorithm.params.h=25 seed=200 --out freshness_200.csv
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from raysfl.algorithms.common.aux_client import AuxClient, AuxClientState, Batch
from raysfl.algorithms.common.fsl_round import chunks, round_batch_sizes, round_lr, upload_batches
from raysfl.algorithms.common.fsl_server import FSLServer
from raysfl.algorithms.cse_fsl import cse_fsl_rules
from raysfl.engine.hosts import build_model
from raysfl.engine.rng import seed_sequence, torch_seed
from raysfl.engine.runner import prepare
from raysfl.scenario import Scenario, load_scenario

KINDS = ("forward", "updated", "unseen")


class RecordingAuxClient(AuxClient):
    """:class:`AuxClient` (the code's upload) that keeps its last training minibatch and auxiliary logits."""

    last_batch: Batch | None = None
    last_aux_logits: torch.Tensor | None = None

    def _next_batch(self, state: AuxClientState) -> Batch:
        batch = super()._next_batch(state)
        self.last_batch = batch
        return batch

    def _forward(
        self, part: str, state: AuxClientState, x: torch.Tensor, keep_buffers: bool = False
    ) -> torch.Tensor:
        out = super()._forward(part, state, x, keep_buffers)
        if part == "aux" and not keep_buffers:  # a training step's forward, before its update
            self.last_aux_logits = out.detach()
        return out

    def activations(self, state: AuxClientState, x: torch.Tensor) -> torch.Tensor:
        """x_c(x) with the client's current tensors (no training step, buffers untouched)."""
        with torch.no_grad():
            return self._forward("client", state, x, keep_buffers=True).contiguous()

    def aux_fit(self, state: AuxClientState, acts: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
        """Cross-entropy (eq. 5's loss) and accuracy of the client's current auxiliary head on ``acts``."""
        with torch.no_grad():
            return scores(self._forward("aux", state, acts, keep_buffers=True), y)


def scores(logits: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """Cross-entropy and top-1 accuracy of ``logits`` against ``y``."""
    return float(F.cross_entropy(logits, y)), float((logits.argmax(1) == y).float().mean())


@dataclass
class ControlStream:
    """Batches of one client's data for the ``unseen`` upload, drawn from streams no client call uses."""

    indices: np.ndarray
    rng: np.random.Generator
    gen: torch.Generator

    def batch(self, client: AuxClient, size: int) -> Batch:
        """``size`` samples of the client's data without replacement, through the train transform."""
        idx = self.indices[self.rng.choice(len(self.indices), size=size, replace=False)]
        x = client.transform(client.train_x[idx], self.gen)
        return x, torch.from_numpy(np.asarray(client.train_y[idx], dtype=np.int64))


@dataclass
class FitSums:
    """Running sums of the auxiliary head's loss and accuracy on one kind of upload over a round."""

    loss: float = 0.0
    acc: float = 0.0
    n: int = 0

    def add(self, loss: float, acc: float) -> None:
        self.loss, self.acc, self.n = self.loss + loss, self.acc + acc, self.n + 1

    def means(self) -> tuple[float, float]:
        return (self.loss / self.n, self.acc / self.n) if self.n else (math.nan, math.nan)


@dataclass
class Uploads:
    """One round's uploads, by (window, client), each kind's (activations, labels)."""

    items: dict[tuple[int, int], dict[str, Batch]] = field(default_factory=dict)

    def in_round_robin_order(self) -> list[tuple[int, dict[str, Batch]]]:
        """Window 0 of every client (ascending), then window 1, ...: the policy's ``round_robin`` order."""
        return [(k, self.items[(w, k)]) for w, k in sorted(self.items)]


def check_scenario(sc: Scenario) -> None:
    """This loop runs CSE-FSL with every client in every round and one aggregation per round."""
    if sc.algorithm.name != "cse_fsl":
        raise SystemExit(
            f"cse_fsl_upload_freshness: algorithm.name must be 'cse_fsl', got {sc.algorithm.name!r}"
        )
    problems = []
    if sc.federation.active_clients < sc.federation.num_clients:
        problems.append("federation.active_clients must equal num_clients (every client in every round)")
    if sc.params.agg_every_batches:
        problems.append("algorithm.params.agg_every_batches must be 0 (one aggregation per round)")
    if sc.engine.precision != "float32":
        problems.append("engine.precision must be 'float32'")
    if problems:
        raise SystemExit("cse_fsl_upload_freshness: " + "; ".join(problems))


def run(sc: Scenario, data_dir: str | None) -> list[dict[str, Any]]:
    """Train the clients once; three servers, one per upload kind; one row per evaluation."""
    check_scenario(sc)
    prep = prepare(sc, data_dir)
    setup, ds, rules = prep.setup, prep.dataset, cse_fsl_rules(sc.params)
    train, eng = sc.train, sc.engine

    def transform(x: np.ndarray, gen: torch.Generator) -> torch.Tensor:
        return prep.transform.train(torch.from_numpy(np.ascontiguousarray(x)), gen)

    torch.set_num_threads(eng.torch_threads)
    model = build_model(setup)
    client = RecordingAuxClient(
        model.client, model.aux, ds.train_x, ds.train_y, transform, train,
        drop_last=rules.drop_last, recompute_after_update=False, max_grad_norm=rules.max_grad_norm,
    )  # fmt: skip
    test_x = prep.transform.test(torch.from_numpy(np.array(ds.test_x, copy=True)))
    test_y = torch.from_numpy(np.array(ds.test_y, dtype=np.int64, copy=True))
    servers = {
        kind: FSLServer(setup, rules, build_model(setup), test_x, test_y, seed=torch_seed(sc.seed, "server"))
        for kind in KINDS
    }
    clients = range(setup.num_clients)
    states = {
        k: client.init_state(k, setup.client_indices[k], seed_sequence(sc.seed, "client", k)) for k in clients
    }
    controls = {
        k: ControlStream(
            np.asarray(setup.client_indices[k]),
            np.random.Generator(np.random.PCG64(seed_sequence(sc.seed, "freshness-control", k))),
            torch.Generator().manual_seed(torch_seed(sc.seed, "freshness-control", k)),
        )
        for k in clients
    }
    torch.set_num_threads(eng.server_threads)  # the server's calls run with its threads, as in the engine
    rows = [evaluation(0, servers, {}, time.monotonic())]
    for r in range(train.global_iterations):
        start = time.monotonic()
        lr = round_lr(train.lr, rules.lr_decay, rules.lr_decay_every, r)
        for server in servers.values():
            server.begin_round(tuple(clients), r)
        uploads, fit = Uploads(), {kind: FitSums() for kind in KINDS}
        torch.set_num_threads(eng.torch_threads)
        for k in clients:
            state = states[k]
            client.load(state, servers["forward"].send_model(k), lr)
            sizes = round_batch_sizes(
                setup.client_size(k), train.batch_size, rules.drop_last, rules.local_epochs
            )
            ups = set(upload_batches(len(sizes), rules.h, rules.upload_rule))
            window = 0
            for a, b, up in chunks(0, len(sizes), ups):
                out = client.run(state, b - a, up)
                if out is None:
                    continue
                assert client.last_batch is not None
                x, y = client.last_batch
                x_ctrl, y_ctrl = controls[k].batch(client, len(y))
                kinds = {
                    "forward": out,
                    "updated": (client.activations(state, x), y),
                    "unseen": (client.activations(state, x_ctrl), y_ctrl),
                }
                assert client.last_aux_logits is not None  # the step's own loss: x_c^(m), a_c^(m)
                fit["forward"].add(*scores(client.last_aux_logits, y))
                for kind in ("updated", "unseen"):  # x_c^(m+1) with a_c^(m+1)
                    fit[kind].add(*client.aux_fit(state, *kinds[kind]))
                uploads.items[(window, k)] = kinds
                window += 1
            weights = client.weights(state)
            for server in servers.values():
                server.on_client_model(k, weights, setup.client_size(k))
        torch.set_num_threads(eng.server_threads)
        for k, kinds in uploads.in_round_robin_order():
            for kind, server in servers.items():
                server.on_smashed(k, kinds[kind], lr)
        for server in servers.values():
            server.aggregate()
        rows.append(evaluation(r + 1, servers, fit, start))
        print(format_row(rows[-1]), file=sys.stderr, flush=True)
    return rows


def evaluation(
    round_index: int, servers: dict[str, FSLServer], fit: dict[str, FitSums], start: float
) -> dict[str, Any]:
    """Each server's test accuracy and mean training loss; each kind's auxiliary-head fit over the round."""
    row: dict[str, Any] = {"round": round_index}
    for kind, server in servers.items():
        m = server.evaluate()
        row[f"acc_{kind}"] = m["accuracy"]
        row[f"server_loss_{kind}"] = m["train_loss"]
        row["aux_acc_test"] = m["aux_accuracy"]
        if kind in fit:
            row[f"aux_loss_{kind}"], row[f"aux_acc_{kind}"] = fit[kind].means()
    row["wall_s"] = round(time.monotonic() - start, 1)
    return row


def format_row(row: dict[str, Any]) -> str:
    accs = " ".join(f"{k}={100 * row[f'acc_{k}']:.2f}" for k in KINDS)
    return f"round {row['round']}: {accs} ({row['wall_s']} s)"


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """A markdown row per evaluation: accuracies, auxiliary-head losses and server losses by kind."""
    head = [f"accuracy {k} %" for k in KINDS] + [f"aux loss {k}" for k in KINDS]
    head += [f"server loss {k}" for k in KINDS]
    lines = ["| round | " + " | ".join(head) + " |", "|---" * (1 + len(head)) + "|"]
    for row in rows:
        cells = [f"{100 * row[f'acc_{k}']:.2f}" for k in KINDS]
        cells += [loss_cell(row.get(f"aux_loss_{k}")) for k in KINDS]
        cells += [loss_cell(row.get(f"server_loss_{k}")) for k in KINDS]
        lines.append(f"| {row['round']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def loss_cell(value: float | None) -> str:
    """A loss to 3 decimals; "–" where there is none (the evaluation before any training)."""
    return "–" if value is None or math.isnan(value) else f"{value:.3f}"


def engine_accuracies(
    path: str, overrides: Sequence[str], recompute: bool, data_dir: str | None
) -> list[float]:
    """The engine's accuracies before and after round 1 of the scenario, round-robin order, local backend."""
    import tempfile

    from raysfl.engine.runner import run as run_engine
    from raysfl.run_files import read_metrics

    forced = [
        'algorithm.params.server_order="round_robin"',
        f"algorithm.params.recompute_after_update={str(recompute).lower()}",
        "metrics.progress=false",
        "train.global_iterations=1",
    ]
    scenario = load_scenario(path, [*overrides, *forced])
    with tempfile.TemporaryDirectory() as out:
        run_engine(scenario, Path(out) / "run", backend="local", data_dir=data_dir)
        return [float(row["accuracy"]) for row in read_metrics(Path(out) / "run")]


PAIRS = (("updated", "forward"), ("unseen", "forward"), ("updated", "unseen"))


def last_mean(rows: Sequence[dict[str, str]], column: str, last: int) -> float:
    """Mean of ``column`` over the last ``last`` evaluations, in percent for accuracies."""
    values = [float(row[column]) for row in rows[-last:]]
    return (100.0 if "acc_" in column else 1.0) * sum(values) / len(values)


def summarize(paths: Sequence[Path], last: int) -> str:
    """Per seed (one CSV each) and paired over seeds: each kind's accuracy and fit over the last evaluations.

    The paired differences carry their 95 % Student-t intervals (n − 1 degrees of freedom).
    """
    from raysfl.report.paired import seed_differences

    tables = {path: list(csv.DictReader(path.open())) for path in paths}
    columns = [f"{m}_{k}" for m in ("acc", "aux_acc", "aux_loss", "server_loss") for k in KINDS]
    lines = [
        f"Over the last {last} evaluations: test accuracy % of each server; accuracy % and loss of the",
        "auxiliary head on each kind of upload; each server's training loss on its uploads.",
        "",
        "| run | " + " | ".join(columns) + " |",
        "|---" * (1 + len(columns)) + "|",
    ]
    values = {path: [last_mean(rows, c, last) for c in columns] for path, rows in tables.items()}
    for path, row in values.items():
        lines.append(f"| {path.stem} | " + " | ".join(f"{v:.3f}" for v in row) + " |")
    means = [sum(col) / len(col) for col in zip(*values.values(), strict=True)]
    lines.append("| mean | " + " | ".join(f"{v:.3f}" for v in means) + " |")
    lines += [
        "",
        "| paired difference (points) | mean ± std | 95 % t interval | ahead |",
        "|---|---|---|---|",
    ]
    for a, b in PAIRS:
        runs = list(tables.values())
        diff = seed_differences(
            {i: last_mean(rows, f"acc_{a}", last) for i, rows in enumerate(runs)},
            {i: last_mean(rows, f"acc_{b}", last) for i, rows in enumerate(runs)},
            scale=1.0,  # already in points
        )
        assert diff.mean is not None
        std, bounds = diff.std or math.nan, diff.interval() or (math.nan, math.nan)
        lines.append(
            f"| {a} − {b} | {diff.mean:+.2f} ± {std:.2f} | [{bounds[0]:+.2f}, {bounds[1]:+.2f}] "
            f"| {diff.ahead} of {len(diff.differences)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", nargs="?", help="a CSE-FSL scenario file")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, as for `raysfl run`")
    parser.add_argument("--out", type=Path, help="write the rows as CSV here")
    parser.add_argument("--data-dir", default=None, help="dataset folder (default: $RAYSFL_DATA)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="also run the engine's round 1 in round-robin order and compare accuracies",
    )
    parser.add_argument(
        "--summarize",
        type=Path,
        nargs="+",
        metavar="CSV",
        help="pool the CSVs of earlier runs (one per seed)",
    )
    parser.add_argument(
        "--last", type=int, default=3, help="with --summarize: evaluations averaged (default 3)"
    )
    args = parser.parse_args(argv)
    if args.summarize:
        print(summarize(args.summarize, args.last))
        return 0
    if args.scenario is None:
        parser.error("give a scenario file, or --summarize with the CSVs of earlier runs")
    rows = run(load_scenario(args.scenario, args.overrides), args.data_dir)
    print(markdown(rows))
    if args.out:
        with args.out.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[-1]))
            writer.writeheader()
            writer.writerows({k: row.get(k, "") for k in rows[-1]} for row in rows)
    if args.check:
        for kind, recompute in (("forward", False), ("updated", True)):
            engine = engine_accuracies(args.scenario, args.overrides, recompute, args.data_dir)
            mine = [row[f"acc_{kind}"] for row in rows[:2]]
            same = engine == mine
            print(
                f"engine, recompute_after_update = {recompute}: "
                f"{'equal' if same else 'DIFFERENT'} to '{kind}' ({engine} vs {mine})"
            )
            if not same:
                return 1
    return 0


if __name__ == "__main__":
    from raysfl.config import ConfigError
    from raysfl.data.errors import DataError

    try:
        sys.exit(main())
    except (ConfigError, DataError) as err:  # bad input: the message, not a traceback
        print(f"cse_fsl_upload_freshness: {err}", file=sys.stderr)
        sys.exit(2)
