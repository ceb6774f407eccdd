"""Emulated-time scheduling of (lightweight) FedSL: synchronous rounds of one minibatch per client.

The policy sees sizes and times only. Round t (Alg. 1; spec §2.3), all K clients:

    start   each client forwards its minibatch (b Φ_c^F (1 − χ s) / f_k) and uploads the kept activation
            values and labels (S^up_k / R^up_k)                                               → ``act``
    act     when all K are in (the barrier, eq. (7)): the server step (T^S); each client downloads its
            gradient values (S^dn_k / R^dn_k), back-propagates, prunes, quantizes, steps    → ``end``
    end     at max_k of those; if t mod I = 0 (or the last round) each client uploads w_{c,k} → ``model``;
            otherwise round t + 1 starts at once
    model   when all K models are in: FedAvg (eq. (14)), the average goes down (max_k T^md_k), evaluate
            when due, then the next round starts

The number of values each client sends is known here without tensors: the dropout mask is drawn from a seed
the coordinator, the client and the server share (:mod:`dropout`). The sparsity s charged for a round's
compute is the scheduled ρ_{t−1} [A] (the client's actual sparsity is only lower right after an aggregation).
Each evaluation reports the latency of the last round and the means since the previous evaluation
(``latency_uplink_s`` is Fig. 4's quantity, max_k T^up_k).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from raysfl.algorithms.actions import CLIENT, SERVER, Action, Call, Event, Log, Schedule, Slot, Stop
from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.common.batching import batch_size_at
from raysfl.algorithms.common.fsl_accounting import tensor_bytes
from raysfl.algorithms.common.schedule import eval_due, eval_slot, evaluate, out_of_time
from raysfl.algorithms.lightweight_fedsl.accounting import VALUE_BYTES, client_round_bytes
from raysfl.algorithms.lightweight_fedsl.client import FedSLClient
from raysfl.algorithms.lightweight_fedsl.dropout import kept_count
from raysfl.algorithms.lightweight_fedsl.latency import RoundLatency, pruned_flops, round_latency
from raysfl.algorithms.lightweight_fedsl.pruning import sparsity_target
from raysfl.algorithms.lightweight_fedsl.server import FedSLServer


@dataclass(frozen=True)
class FedSLCosts:
    """Per-sample FLOPs, the split tensor's size and the client-model bytes (measured on the model)."""

    client_forward_flops: float
    client_backward_flops: float
    server_forward_flops: float
    server_backward_flops: float
    activation_shape: tuple[int, ...]  # one sample's split-layer output
    client_params: int
    model_bytes: int  # client-side state dict (parameters + buffers): one aggregation transfer

    @classmethod
    def measure(cls, setup: RunSetup, profile: Any) -> FedSLCosts:
        """From the :class:`ModelProfile` plus the client state dict built on the meta device."""
        from raysfl.models.zoo import build_split_model

        c, h, _ = setup.input_shape
        with torch.device("meta"):
            model = build_split_model(setup.scenario.model, c, h, setup.num_classes, seed=0)
        return cls(
            client_forward_flops=float(profile.client_forward_flops),
            client_backward_flops=float(profile.client_backward_flops),
            server_forward_flops=float(profile.server_forward_flops),
            server_backward_flops=float(profile.server_backward_flops),
            activation_shape=tuple(int(s) for s in profile.activation_shape),
            client_params=int(profile.client_params),
            model_bytes=int(tensor_bytes(model.client.state_dict())),
        )


@dataclass
class Member:
    """One client's current round."""

    client: int
    b: int = 0
    kept: int = 0
    forward_s: float = 0.0
    uplink_s: float = 0.0
    downlink_s: float = 0.0
    backward_s: float = 0.0
    model_up_s: float = 0.0


@dataclass
class LatencyLog:
    """Latencies of the rounds since the last evaluation, and of the last round."""

    rounds: list[RoundLatency] = field(default_factory=list)
    last: RoundLatency | None = None
    uplink_total_s: float = 0.0

    def add(self, r: RoundLatency) -> None:
        """Record one round."""
        self.rounds.append(r)
        self.last = r
        self.uplink_total_s += r.uplink_s

    def report(self) -> dict[str, float]:
        """Numbers attached to an evaluation row; resets the since-last-evaluation window.

        Before the first round every value is 0, so the metrics table has every column from its first row.
        """
        rs, last = self.rounds, self.last
        n = max(len(rs), 1)
        out = {
            "latency_round_s": last.total_s if last else 0.0,
            "latency_uplink_s": last.uplink_s if last else 0.0,
            "latency_round_mean_s": sum(r.total_s for r in rs) / n,
            "latency_uplink_mean_s": sum(r.uplink_s for r in rs) / n,
            "latency_server_mean_s": sum(r.server_s for r in rs) / n,
            "latency_aggregation_mean_s": sum(r.aggregation_s for r in rs) / n,
            "latency_uplink_total_s": self.uplink_total_s,
        }
        self.rounds = []
        return out


class FedSLPolicy:
    """Round-synchronous scheduling of lightweight FedSL."""

    # grid cell of the latest global iteration for train.eval_every_s (schedule.eval_slot); a class default,
    # so checkpoints taken before the option existed resume with it
    eval_cell = 0

    def __init__(self, setup: RunSetup, time: Any, costs: FedSLCosts, rng: np.random.Generator) -> None:
        self.setup = setup
        self.p = setup.params
        self.train = setup.scenario.train
        self.seed = setup.scenario.seed
        self.time = time
        self.costs = costs
        self.rng = rng  # draws the participants of each aggregation period when C < K
        self.total_rounds = self.train.global_iterations
        self.horizon = self.p.prune_rounds or self.total_rounds
        self.label_bytes = 4 if self.p.label_dtype == "int32" else 8
        self.act_numel = int(np.prod(costs.activation_shape))
        k = setup.num_clients
        self.steps = [0] * k
        self.samples = 0
        self.round = 0  # rounds completed
        self.version = 0  # aggregations
        self.last_eval = 0
        self.participants: list[int] = []
        self.members: dict[int, Member] = {}
        self.arrived = 0
        self.models_in = 0
        self.round_start = 0.0
        self.server_busy = 0.0
        self.latency = LatencyLog()

    # --- the policy protocol ---------------------------------------------------------------------------
    def start(self) -> list[Action]:
        """Evaluate the initial model; start round 1."""
        return [
            *evaluate(0, 0.0, {"epoch": 0.0, "sparsity_target": 0.0, **self.latency.report()}),
            *self._start_round(0.0, self._draw()),
        ]

    def on_event(self, ev: Event) -> list[Action]:
        """``act`` (an upload arrives), ``end`` (every backward is done), ``model`` (a model arrives)."""
        if ev.kind == "act":
            return self._on_act(ev)
        if ev.kind == "end":
            return self._on_end(ev.t)
        if ev.kind == "model":
            return self._on_model(ev)
        raise RuntimeError(f"lightweight_fedsl policy got an unknown event kind {ev.kind!r}")

    # --- a round ----------------------------------------------------------------------------------------
    def _sparsity(self, t: int) -> float:
        return sparsity_target(t, self.horizon, self.p.prune_final) if self.p.prune_final > 0 else 0.0

    def _draw(self) -> list[int]:
        """The clients of the next aggregation period: all K [P], or C drawn uniformly when C < K [A]."""
        k, c = self.setup.num_clients, self.setup.scenario.federation.active_clients
        if c >= k:
            return list(range(k))
        return sorted(int(x) for x in self.rng.choice(k, size=c, replace=False))

    def _start_round(self, t0: float, participants: list[int] | None = None) -> list[Action]:
        """Round t: forward + upload of every participant (``participants`` starts a new period)."""
        if participants is not None:
            self.participants = participants
        t_idx = self.round + 1
        s = self._sparsity(t_idx - 1)  # the client model's scheduled sparsity during this round [A]
        c, tm = self.costs, self.time
        self.round_start = t0
        self.members, self.arrived, self.models_in = {}, 0, 0
        actions: list[Action] = []
        for k in self.participants:
            b = batch_size_at(self.steps[k], self.setup.client_size(k), self.train.batch_size)
            self.steps[k] += 1
            self.samples += b
            shape = (b, *c.activation_shape)
            kept = kept_count(self.seed, k, t_idx, shape, self.p.dropout, self.p.dropout_granularity)
            m = Member(k, b, kept)
            m.forward_s = tm.compute_s(k, pruned_flops(c.client_forward_flops, s, self.p.sparse_speedup), b)
            m.uplink_s = tm.upload_s(k, self._bytes(m).up)
            self.members[k] = m
            due = t0 + m.forward_s + m.uplink_s
            actions += [
                Call(CLIENT, FedSLClient.forward, (t_idx,), client=k, out=Slot(("acts", k)), pace_s=due - t0),
                Schedule(due, "act", k, {"awaits": ("acts", k)}),
            ]
        return actions

    def _bytes(self, m: Member, aggregate: bool = False) -> Any:
        return client_round_bytes(
            m.kept,
            m.b,
            m.b * self.act_numel,
            self.label_bytes,
            bitmap=self.p.sends_bitmap,
            model_bytes=self.costs.model_bytes,
            aggregate=aggregate,
        )

    def _on_act(self, ev: Event) -> list[Action]:
        m = self.members[ev.client]
        by = self._bytes(m)
        self.arrived += 1
        actions: list[Action] = [
            Log(
                {
                    "t": ev.t,
                    "kind": "act",
                    "client": m.client,
                    "e": self.round + 1,
                    "version": self.version,
                    "staleness": 0,
                    "bytes_up": by.up,
                    "bytes_labels": by.labels,
                }
            )
        ]
        if self.arrived < len(self.members):
            return actions
        return actions + self._barrier(ev.t)

    def _barrier(self, t: float) -> list[Action]:
        """All uploads are in: the server step, the gradients down, the clients' backward passes."""
        t_idx, c, tm, p = self.round + 1, self.costs, self.time, self.p
        total_b = sum(m.b for m in self.members.values())
        self.server_busy = tm.server_s(c.server_forward_flops + c.server_backward_flops, total_b)
        done = t + self.server_busy
        target = self._sparsity(t_idx)
        s = self._sparsity(t_idx - 1)
        overhead = p.update_flops_per_param * c.client_params
        if p.prune_final > 0:
            overhead += p.importance_flops_per_param * c.client_params
        clients = tuple(self.members)
        actions: list[Action] = [
            Call(
                SERVER,
                FedSLServer.step,
                (t_idx, clients, *[Slot(("acts", k)) for k in clients]),
                free=tuple(Slot(("acts", k)) for k in clients),
                pace_s=self.server_busy,
            ),
            Log({"t": t, "kind": "server", "e": t_idx, "version": self.version, "server_update": 1}),
        ]
        for k, m in self.members.items():
            m.downlink_s = tm.download_s(k, m.kept * VALUE_BYTES)
            m.backward_s = tm.compute_s(
                k, pruned_flops(c.client_backward_flops, s, p.sparse_speedup), m.b
            ) + tm.compute_s(k, overhead, 1)
            g = Slot(("grad", k))
            actions += [
                Call(SERVER, FedSLServer.gradient, (k,), out=g),
                Call(
                    CLIENT,
                    FedSLClient.backward,
                    (g, t_idx, target, self.train.lr),
                    client=k,
                    free=(g,),
                    pace_s=m.downlink_s + m.backward_s,
                ),
                Log({"t": done, "kind": "grad", "client": k, "e": t_idx, "bytes_down": m.kept * VALUE_BYTES}),
            ]
        end = done + max(m.downlink_s + m.backward_s for m in self.members.values())
        return actions + [Schedule(end, "end")]

    def _on_end(self, t: float) -> list[Action]:
        t_idx = self.round + 1
        last = t_idx >= self.total_rounds
        if t_idx % self.p.agg_interval == 0 or last or out_of_time(t, self.train):
            actions: list[Action] = []
            for m in self.members.values():
                m.model_up_s = self.time.upload_s(m.client, self.costs.model_bytes)
                actions += [
                    Call(
                        CLIENT,
                        FedSLClient.weights,
                        client=m.client,
                        out=Slot(("model", m.client)),
                        pace_s=m.model_up_s,
                    ),
                    Schedule(t + m.model_up_s, "model", m.client, {"awaits": ("model", m.client)}),
                ]
            return actions
        self._finish_round([], [])
        return self._start_round(t)

    def _finish_round(self, up: list[float], down: list[float]) -> None:
        ms = list(self.members.values())
        self.latency.add(
            round_latency(
                [m.forward_s for m in ms],
                [m.uplink_s for m in ms],
                self.server_busy,
                [m.downlink_s for m in ms],
                [m.backward_s for m in ms],
                up,
                down,
            )
        )
        self.round += 1

    def _on_model(self, ev: Event) -> list[Action]:
        m, t = self.members[ev.client], ev.t
        self.models_in += 1
        actions: list[Action] = [
            Log(
                {
                    "t": t,
                    "kind": "model",
                    "client": m.client,
                    "bytes_up": self.costs.model_bytes,
                    "version": self.version,
                    "staleness": 0,
                }
            )
        ]
        if self.models_in < len(self.members):
            return actions
        clients = list(self.members)
        actions.append(
            Call(
                SERVER,
                FedSLServer.aggregate,
                tuple(Slot(("model", k)) for k in clients),
                free=tuple(Slot(("model", k)) for k in clients),
            )
        )
        self.version += 1
        nxt = self._draw()  # the next period's clients download the aggregate before their forward
        down = [self.time.download_s(k, self.costs.model_bytes) for k in nxt]
        for k, d in zip(nxt, down, strict=True):
            g = Slot(("global", k))
            actions += [
                Call(SERVER, FedSLServer.send_model, (k,), out=g),
                Call(CLIENT, FedSLClient.load, (g,), client=k, free=(g,), pace_s=d),
                Log({"t": t, "kind": "download", "client": k, "bytes_down": self.costs.model_bytes}),
            ]
        self._finish_round([x.model_up_s for x in self.members.values()], down)
        t_next = t + max(down)
        last = self.round >= self.total_rounds
        late = out_of_time(t_next, self.train)
        if self.train.eval_every_s > 0:
            due = eval_due(self.round, t, self.train, self.eval_cell)
            self.eval_cell = eval_slot(t, self.train)
        else:
            due = self.round - self.last_eval >= self.train.eval_every
        if last or late or due:
            self.last_eval = self.round
            info = {
                "epoch": self.samples / max(sum(len(ix) for ix in self.setup.client_indices), 1),
                "sparsity_target": self._sparsity(self.round),
                **self.latency.report(),
            }
            actions += evaluate(self.round, t, info)
        if last or late:
            return [*actions, Stop("budget reached" if last else "emulated time limit reached")]
        return actions + self._start_round(t_next, nxt)

    def global_iteration(self) -> int:
        """Rounds completed so far (checkpoints are taken every N of them)."""
        return self.round
