"""Synchronous split scheduling in virtual time: MiniBatch-SFL's round and barrier (specs/gas.md §10.2).

The policy sees times, ids and sizes only. One round (= one global iteration):

    start    C clients drawn uniformly without replacement from K (policy stream); each downloads the
             client-side model of its cut (free with ``free_downloads``), forwards, uploads A_k, Y_k → ``act``
    act      an arrival; when all C of the iteration are in (the barrier, at the latest arrival), the server
             computes every G_k and steps (``iteration``); each client downloads its G_k and back-propagates,
             then forwards and uploads the next minibatch (→ ``act``) or, after the E-th iteration, uploads
             its client-side model (→ ``model``)
    model    when all C models are in (the latest upload ends the round) the server aggregates; evaluate when
             due; stop after T rounds, else the next round starts at once

Per client and iteration e, with t_D = barrier + server time:
    a_k^1     = t_0 + download(w_c) + fwd_k + upload_k(A, Y)
    T_e       = max_k a_k^e                                                   (barrier)
    a_k^{e+1} = T_e + server + download_k(G) + bwd_k + fwd_k + upload_k(A, Y)
    round end = max_k (T_E + server + download_k(G) + bwd_k + upload_k(w_c))
Durations come from :class:`raysfl.system.durations.TimeModel`; FLOPs and bytes from the measured model.
Subclasses (S2FL) choose per round which split each client is timed and trained at, and the groups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from raysfl.algorithms.actions import CLIENT, SERVER, Action, Call, Event, Log, Schedule, Slot
from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.common.batching import batch_size_at
from raysfl.algorithms.common.costs import SplitCosts
from raysfl.algorithms.common.schedule import after_update, eval_slot, evaluate, finish_job, start_log
from raysfl.algorithms.minibatch_sfl.client import SyncSplitClient
from raysfl.algorithms.minibatch_sfl.server import SyncSplitServer


def proportional_batch(size: int, round_total: int, batch_size: int, active: int) -> int:
    """The code's intended per-client batch max(⌊|D_k|/Σ_round|D| · B·C⌋, 1) (specs/gas.md §10.10).

    Integer arithmetic, so ⌊·⌋ is exact. Example: |D_k| = 300 of 1000 in the round, B = 32, C = 3
    gives ⌊300·96/1000⌋ = 28.

    >>> proportional_batch(300, 1000, 32, 3)
    28
    """
    return max(size * batch_size * active // round_total, 1)


@dataclass
class Member:
    """One client of the current round."""

    client: int
    time_split: str  # whose FLOPs and activation bytes the time model charges
    train_split: str  # the cut the client actually trains at
    b: int = 0  # size of the minibatch in flight
    e: int = 1  # local iteration in flight
    due: float = 0.0  # scheduled arrival of that minibatch


class SyncSplitPolicy:
    """Decides what happens when, for MiniBatch-SFL (and, through :meth:`plan`, for S2FL).

    Args:
        setup: the run setup.
        time: the :class:`raysfl.system.durations.TimeModel`.
        costs: split name → measured costs, for every split a client may be timed or trained at.
        rng: the policy stream (client sampling).
        default_split: the scenario's split.
    """

    # grid cell of the latest global iteration for train.eval_every_s (schedule.eval_slot); a class default,
    # so checkpoints taken before the option existed resume with it
    eval_cell = 0

    def __init__(
        self,
        setup: RunSetup,
        time: Any,
        costs: Mapping[str, SplitCosts],
        rng: np.random.Generator,
        default_split: str,
    ) -> None:
        self.setup = setup
        self.p = setup.params
        self.train = setup.scenario.train
        self.fed = setup.scenario.federation
        self.time = time
        self.costs = dict(costs)
        self.rng = rng
        self.default_split = default_split
        k = setup.num_clients
        self.steps = [0] * k  # minibatches drawn by each client in its current pass
        self.bsize = [self.train.batch_size] * k  # each client's current batch size
        self.version = 0  # rounds so far = global iteration
        self.members: list[Member] = []
        self.groups: tuple[tuple[int, ...], ...] = ()
        self.arrived = 0
        self.models_in = 0

    # --- hooks -------------------------------------------------------------------------------------------
    def plan(
        self, clients: Sequence[int], batch_sizes: Sequence[int], t: float
    ) -> tuple[list[str], list[str], list[list[int]]]:
        """Per client its time split and train split, and the groups (positions into ``clients``).

        MiniBatch-SFL: everyone at the scenario's split, one group.
        """
        n = len(clients)
        return [self.default_split] * n, [self.default_split] * n, [list(range(n))]

    def report_info(self) -> dict[str, Any]:
        """Extra numbers attached to each evaluation row (none for MiniBatch-SFL)."""
        return {}

    # --- helpers --------------------------------------------------------------------------------------
    def _next_batch(self, k: int) -> int:
        b = batch_size_at(self.steps[k], self.setup.client_size(k), self.bsize[k])
        self.steps[k] += 1
        return b

    def iteration_cost(self, k: int, costs: SplitCosts, b: int) -> float:
        """One local iteration of client k at a split: fwd + bwd + upload(A, Y) + download(G).

        The quantity the S2FL split choice compares (specs/gas.md §10.10: 2·W_j/f_k + B·S_j/R_k in the
        code, which takes backward = forward, ignores labels and downloads; here the measured FLOPs and
        the run's transfer rules, the same durations the barrier below charges).
        """
        tm = self.time
        return (
            tm.compute_s(k, costs.client_forward_flops + costs.client_backward_flops, b)
            + tm.upload_s(k, costs.upload_bytes(b))
            + tm.download_s(k, costs.gradient_bytes(b))
        )

    def server_busy_s(self) -> float:
        """Server time of one barrier: the C gradient passes, then the step pass of each group.

        Per batch: Σ_k b_k·(F_G + F_step), with F_G = forward + backward to A_k and F_step = forward +
        backward to the weights, per sample of client k's time split (docs/algorithms/minibatch_sfl.md) [A].
        Per sample (one image's FLOPs per pass, the GAS code's rule [C]): each of the C gradient passes is
        charged one sample, and each group's step on its concatenation is *one* pass, charged one sample of
        the group's largest F_step (its shallowest cut runs the most server layers), not one per member.
        Example, C = 3 in one group, F_G = 2, F_step = 3, f_server = 1: per sample 3·2 + 3 = 9 s, where
        summing per member would charge 15 s.
        """
        tm = self.time
        if tm.timing.flops_accounting != "per-sample":
            busy = 0.0
            for m in self.members:
                c = self.costs[m.time_split]
                busy += tm.server_s(c.gradient_pass_flops + c.update_pass_flops, m.b)  # G_k, then the step
            return busy
        gradients = sum(tm.server_s(self.costs[m.time_split].gradient_pass_flops, m.b) for m in self.members)
        steps = sum(
            tm.server_s(max(self.costs[self.members[i].time_split].update_pass_flops for i in g), 1)
            for g in self.groups
        )
        return gradients + steps

    def _fwd_up(self, m: Member, b: int) -> float:
        c = self.costs[m.time_split]
        return self.time.compute_s(m.client, c.client_forward_flops, b) + self.time.upload_s(
            m.client, c.upload_bytes(b)
        )

    def _model_bytes(self, m: Member) -> int:
        """The client-side model that travels: the one of the split the client trains."""
        return self.costs[m.train_split].client_model_bytes

    def _member(self, k: int) -> Member:
        for m in self.members:
            if m.client == k:
                return m
        raise RuntimeError(f"invariant broken: client {k} is not in the current round")

    # --- the policy protocol --------------------------------------------------------------------------
    def start(self) -> list[Action]:
        """Evaluate the initial model and start the first round."""
        return evaluate(0, 0.0, self.report_info()) + self._start_round(0.0)

    def on_event(self, ev: Event) -> list[Action]:
        """Dispatch an ``act`` or ``model`` event."""
        if ev.kind == "act":
            return self._on_activations(ev)
        if ev.kind == "model":
            return self._on_model(ev)
        raise RuntimeError(f"synchronous split policy got an unknown event kind {ev.kind!r}")

    def _start_round(self, t: float) -> list[Action]:
        k_all, c = self.setup.num_clients, self.fed.active_clients
        clients = sorted(int(x) for x in self.rng.choice(k_all, size=c, replace=False))
        fresh = self.p.batch_rule == "proportional"
        if fresh:
            total = sum(self.setup.client_size(k) for k in clients)
            for k in clients:
                self.bsize[k] = proportional_batch(self.setup.client_size(k), total, self.train.batch_size, c)
                self.steps[k] = 0
        time_splits, train_splits, groups = self.plan(clients, [self.bsize[k] for k in clients], t)
        self.members = [
            Member(k, ts, tr) for k, ts, tr in zip(clients, time_splits, train_splits, strict=True)
        ]
        self.groups = tuple(tuple(int(i) for i in g) for g in groups)
        self.arrived = self.models_in = 0
        actions: list[Action] = [
            Call(SERVER, SyncSplitServer.client_weights, (s,), out=Slot(("global", s)))
            for s in dict.fromkeys(train_splits)
        ]
        for m in self.members:
            k = m.client
            m.b = self._next_batch(k)
            m.due = t + self.time.download_s(k, self._model_bytes(m)) + self._fwd_up(m, m.b)
            actions += [
                Call(
                    CLIENT,
                    SyncSplitClient.start_round,
                    (Slot(("global", m.train_split)), m.train_split, self.bsize[k], fresh),
                    client=k,
                    out=Slot(("acts", k)),
                    pace_s=m.due - t,
                ),
                Schedule(m.due, "act", k, {"b": m.b, "e": 1, "awaits": ("acts", k)}),
                start_log(t, k, self._model_bytes(m), self.version),
            ]
        return actions

    def _on_activations(self, ev: Event) -> list[Action]:
        m = self._member(ev.client)
        c = self.costs[m.time_split]
        barrier = max(x.due for x in self.members)  # the scheduled latest arrival of this iteration
        self.arrived += 1
        actions: list[Action] = [
            Log(
                {
                    "t": ev.t,
                    "kind": "act",
                    "client": m.client,
                    "e": m.e,
                    "bytes_up": c.upload_bytes(m.b),
                    "bytes_down": c.gradient_bytes(m.b),
                    "staleness": 0,
                    "version": self.version,
                    "queue_s": max(barrier - ev.t, 0.0),
                }
            )
        ]
        if self.arrived < len(self.members):
            return actions
        return actions + self._barrier(ev.t)

    def _barrier(self, t: float) -> list[Action]:
        """All activations of the iteration are in: server update, gradients back, next forwards."""
        self.arrived = 0
        busy = self.server_busy_s()
        done = t + busy
        e = self.members[0].e
        actions: list[Action] = [
            Call(
                SERVER,
                SyncSplitServer.iteration,
                (
                    tuple(m.client for m in self.members),
                    tuple(m.train_split for m in self.members),
                    self.groups,
                    *[Slot(("acts", m.client)) for m in self.members],
                ),
                pace_s=busy,
            ),
            Log({"t": t, "kind": "server", "e": e, "version": self.version, "server_update": 1}),
        ]
        for m in self.members:
            k, c = m.client, self.costs[m.time_split]
            t_back = (
                done
                + self.time.download_s(k, c.gradient_bytes(m.b))
                + self.time.compute_s(k, c.client_backward_flops, m.b)
            )
            actions.append(Call(SERVER, SyncSplitServer.gradient, (k,), out=Slot(("grads", k))))
            if m.e < self.train.local_iterations:
                m.e += 1
                m.b = self._next_batch(k)
                m.due = t_back + self._fwd_up(m, m.b)
                actions += [
                    Call(
                        CLIENT,
                        SyncSplitClient.step,
                        (Slot(("grads", k)),),
                        client=k,
                        out=Slot(("acts", k)),
                        pace_s=m.due - done,
                    ),
                    Schedule(m.due, "act", k, {"b": m.b, "e": m.e, "awaits": ("acts", k)}),
                ]
            else:
                t_model = t_back + self.time.upload_s(k, self._model_bytes(m))
                actions += finish_job(k, Slot(("grads", k)), done, t_model)
        return actions

    def _on_model(self, ev: Event) -> list[Action]:
        m, t = self._member(ev.client), ev.t
        self.models_in += 1
        actions: list[Action] = [
            Log(
                {
                    "t": t,
                    "kind": "model",
                    "client": m.client,
                    "bytes_up": self._model_bytes(m),
                    "staleness": 0,
                    "version": self.version,
                }
            )
        ]
        if self.models_in < len(self.members):
            return actions
        free = tuple(Slot((what, x.client)) for x in self.members for what in ("model", "grads", "acts"))
        actions.append(
            Call(
                SERVER,
                SyncSplitServer.aggregate,
                (
                    tuple(x.train_split for x in self.members),
                    tuple(self.setup.client_size(x.client) for x in self.members),
                    *[Slot(("model", x.client)) for x in self.members],
                ),
                free=free,
            )
        )
        self.version += 1
        more, stop = after_update(self.version, t, self.train, self.report_info, self.eval_cell)
        self.eval_cell = eval_slot(t, self.train)
        actions += more
        if stop:
            return actions
        return actions + self._start_round(t)

    # --- checkpoints --------------------------------------------------------------------------------------
    def global_iteration(self) -> int:
        """Global iterations completed so far (checkpoints are taken every N of them)."""
        return self.version
