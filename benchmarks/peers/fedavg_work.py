"""The FedAvg work the peer benchmark times three ways, built with raysfl's own code; no Ray, no Flower.

raysfl (``raysfl_fedavg.py``), Flower (``flower_fedavg.py``) and a plain single-process loop
(``plain_fedavg.py``) all read the scenario ``scenarios/bench/fedavg_peer.toml`` with the same ``key=value``
overrides, and this module turns it into the same work for the two peers:

* the data and its partition: ``raysfl.engine.runner.load_partitioned``, the function every raysfl run
  loads and partitions its data with;
* the model: ``build_split_model`` with the run's ``("model",)`` seed, so the initial weights are raysfl's,
  in the scenario's ``engine.memory_format`` and ``engine.precision`` (the conv layout and precision raysfl's
  processes use);
* the clients of each round: C of K drawn uniformly without replacement from the ``("policy",)`` stream, the
  draws raysfl's synchronous FedAvg policy makes (:func:`round_clients`);
* a client's job: raysfl's ``FLClient.train`` (E minibatches of B from the client's own cursor and seed
  stream, a fresh SGD with the scenario's lr, momentum and weight decay per job); a client that trained
  before continues its batch order where its last job stopped, as in raysfl (:class:`Trainer` replays
  the earlier minibatches when a process sees the client for the first time);
* the round's aggregation: the |D_k|-weighted average of the C models (raysfl's ``aggregation =
  "data-size"``; Flower's own FedAvg weights by the ``num-examples`` each client reports, |D_k| here);
* the evaluation: raysfl's ``evaluate_split`` on the whole test set, before round 1 and after every
  ``train.eval_every``-th and the last round.

Timing, the same for the three (:func:`result`): start-up is from the process launch
(``RAYSFL_PEER_T0``, set by ``run_all.py``; else this module's import) to the start of the first client's
local training of round 1; time per round is from then to the end of the last evaluation, divided by the
rounds; total is launch to the end of the script, Ray shut down.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

IMPORTED_AT = time.time()
ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "bench" / "fedavg_peer.toml"
T0_VAR = "RAYSFL_PEER_T0"  # the launch time (time.time()) run_all.py hands each script
COLUMNS = ("system", "start-up (s)", "per round (s)", "total (s)", "final accuracy")


def launch_time() -> float:
    """When this process was launched: ``$RAYSFL_PEER_T0`` if set, else when this module was imported."""
    value = os.environ.get(T0_VAR)
    return float(value) if value else IMPORTED_AT


def load(scenario: str | Path | None = None, overrides: Sequence[str] = ()) -> Any:
    """The peer scenario (``scenario`` or :data:`SCENARIO`) with raysfl's ``key=value`` overrides.

    Refuses what the peers do not implement: another algorithm than FedAvg, uniform aggregation, and an
    emulated-time budget (raysfl could stop before the last round).
    """
    from raysfl.scenario import load_scenario

    sc = load_scenario(Path(scenario or SCENARIO), overrides)
    problems = []
    if sc.algorithm.name != "fedavg":
        problems.append(f"algorithm.name = {sc.algorithm.name!r}; the peer benchmark runs fedavg")
    elif sc.params.aggregation != "data-size":
        problems.append("algorithm.params.aggregation must be 'data-size' (Flower weights by num-examples)")
    if sc.train.max_emulated_s:
        problems.append("train.max_emulated_s must be 0: the peers always run train.global_iterations rounds")
    if problems:
        raise ValueError("; ".join(problems))
    return sc


def round_clients(sc: Any) -> list[list[int]]:
    """The clients of each round, ascending: raysfl's synchronous FedAvg draws (``FLPolicy._draw``).

    Every round draws C of all K clients uniformly without replacement from the run's ``("policy",)``
    stream, which nothing else of FedAvg's policy consumes.
    """
    from raysfl.engine.rng import stream

    rng = stream(sc.seed, "policy")
    k, c = sc.federation.num_clients, sc.federation.active_clients
    if c > k:
        raise ValueError(f"active_clients C = {c} exceeds num_clients K = {k}")
    rounds = []
    for _ in range(sc.train.global_iterations):
        rounds.append(sorted(int(x) for x in rng.choice(list(range(k)), size=c, replace=False)))
    return rounds


def evaluated_rounds(sc: Any) -> list[int]:
    """The rounds after which the global model is evaluated (0 is the initial model), as in raysfl."""
    t, every = sc.train.global_iterations, sc.train.eval_every
    return [r for r in range(t + 1) if r == 0 or r == t or r % every == 0]


@dataclass
class Work:
    """Data, partition, model and test set of the peer scenario, as raysfl builds them."""

    scenario: Any
    dataset: Any
    transform: Any
    client_indices: tuple[Any, ...]
    model: Any  # raysfl SplitModel with the run's initial weights

    @property
    def full(self) -> Any:
        """The whole model (client part then server part)."""
        return self.model.full()

    def initial_weights(self) -> dict[str, Any]:
        """The run's initial global model (a state dict of CPU tensors)."""
        return {k: v.detach().clone() for k, v in self.full.state_dict().items()}

    def client_size(self, k: int) -> int:
        """|D_k|."""
        return int(len(self.client_indices[k]))


def build(sc: Any, data_dir: str | None = None) -> Work:
    """Load and partition the data (``raysfl.engine.runner.load_partitioned``, as every raysfl run does) and
    build the model with the run's seed."""
    from raysfl.engine.rng import torch_seed
    from raysfl.engine.runner import load_partitioned
    from raysfl.models.zoo import build_split_model

    ds, transform, part = load_partitioned(sc, data_dir)
    channels = int(ds.train_x.shape[1])
    model = build_split_model(
        sc.model, channels, transform.crop_size, ds.num_classes, seed=torch_seed(sc.seed, "model")
    )  # in the conv layout and precision raysfl's processes use
    model.use_memory_format(sc.engine.memory_format).use_precision(sc.engine.precision)
    return Work(sc, ds, transform, tuple(part.indices), model)


class Evaluator:
    """raysfl's server evaluation: top-1 accuracy and loss of the global model on the whole test set."""

    def __init__(self, work: Work) -> None:
        import numpy as np
        import torch

        ds = work.dataset
        self.work = work
        self.full = work.full
        self.test_x = work.transform.test(torch.from_numpy(np.array(ds.test_x, copy=True)))
        self.test_y = torch.from_numpy(np.array(ds.test_y, dtype=np.int64, copy=True))

    def __call__(self, weights: dict[str, Any]) -> tuple[float, float]:
        """(accuracy, loss) of ``weights`` (flushed with ``engine.flush_denormal``, as raysfl's server)."""
        from raysfl.algorithms.common.evaluate import evaluate_split
        from raysfl.engine.float_mode import flushed

        self.full.load_state_dict(weights)
        parts = self.work.model
        batch = self.work.scenario.train.eval_batch_size
        with flushed(self.work.scenario.engine.flush_denormal):
            return evaluate_split(parts.client, parts.server, self.test_x, self.test_y, batch)


@dataclass
class Trainer:
    """Client jobs in one process: raysfl's ``FLClient`` and the states of the clients it has seen.

    A process that sees client k for the first time after k already trained ``jobs`` times elsewhere (a
    Flower actor) rebuilds k's state from its seed stream and draws the E·jobs minibatches those jobs used,
    so the job continues k's batch order exactly where raysfl's would.
    """

    work: Work
    threads: int | None = None
    logic: Any = None
    states: dict[int, Any] = field(default_factory=dict)
    replayed_batches: int = 0

    def __post_init__(self) -> None:
        from raysfl.algorithms.common.fl_client import FLClient
        from raysfl.algorithms.common.transforms import train_transform

        if self.threads:
            import torch

            torch.set_num_threads(self.threads)
        ds, sc = self.work.dataset, self.work.scenario
        self.logic = FLClient(
            self.work.full, ds.train_x, ds.train_y, train_transform(self.work.transform), sc.train
        )

    def state(self, k: int, jobs: int) -> Any:
        """Client k's state before its job number ``jobs`` (0-based)."""
        st = self.states.get(k)
        if st is None or st.jobs != jobs:
            from raysfl.engine.rng import seed_sequence

            st = self.logic.init_state(
                k, self.work.client_indices[k], seed_sequence(self.work.scenario.seed, "client", k)
            )
            for _ in range(jobs * self.work.scenario.train.local_iterations):
                self.logic.next_batch(st)
                self.replayed_batches += 1
            st.jobs = jobs
            self.states[k] = st
        return st

    def train(self, k: int, weights: dict[str, Any], jobs: int) -> dict[str, Any]:
        """Client k's job number ``jobs`` from ``weights``: E SGD steps; returns the trained state dict.

        With ``engine.flush_denormal`` the job runs flushed, as raysfl's pools run it.
        """
        from raysfl.engine.float_mode import flushed

        with flushed(self.work.scenario.engine.flush_denormal):
            return self.logic.train(self.state(k, jobs), weights)


_CACHE: dict[Any, Any] = {}


def cached(key: Any, make: Any) -> Any:
    """``make()`` once per process and ``key`` (a Flower actor keeps its data and model across messages)."""
    if key not in _CACHE:
        _CACHE[key] = make()
    return _CACHE[key]


def weighted_average(models: Sequence[dict[str, Any]], sizes: Sequence[int]) -> dict[str, Any]:
    """Σ_k |D_k|·w_k / Σ_k |D_k| key by key (float64 sums, cast back), raysfl's data-size FedAvg."""
    from raysfl.algorithms.common.aggregate import weighted_average as average

    return average(models, [float(n) for n in sizes])


def result(
    system: str,
    first_round_start: float,
    last_eval_end: float,
    accuracy: float | None,
    rounds: int,
    t0: float | None = None,
    end: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The row of one system: start-up, time per round, total wall time (seconds) and final accuracy."""
    t0 = launch_time() if t0 is None else t0
    end = time.time() if end is None else end
    return {
        "system": system,
        "startup_s": first_round_start - t0,
        "per_round_s": (last_eval_end - first_round_start) / max(rounds, 1),
        "total_s": end - t0,
        "accuracy": accuracy,
        "rounds": rounds,
        **extra,
    }


def _cell(v: Any, digits: int) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as one markdown table (:data:`COLUMNS`)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        cells = [
            r["system"],
            _cell(r["startup_s"], 1),
            _cell(r["per_round_s"], 2),
            _cell(r["total_s"], 1),
            _cell(r["accuracy"], 4),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(row: dict[str, Any], out: str | None) -> None:
    """Print the row as a markdown table; with ``out`` also write it there as JSON (for run_all.py)."""
    print(table([row]), flush=True)
    if out:
        Path(out).write_text(json.dumps(row) + "\n")


def add_arguments(parser: Any) -> None:
    """The command line every peer script shares: scenario, overrides, data folder, result file."""
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="raysfl scenario overrides, e.g. train.global_iterations=1",
    )
    parser.add_argument("--scenario", default=str(SCENARIO), help="scenario file (default: %(default)s)")
    parser.add_argument(
        "--data-dir", default=None, help="dataset folder (default: raysfl's search, $RAYSFL_DATA)"
    )
    parser.add_argument("--result", default=None, help="also write the row as JSON to this file")
