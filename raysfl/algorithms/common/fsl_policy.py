"""Emulated-time scheduling of CSE-FSL, FSL_AN, SplitFed V1 (FSL_MC) and SplitFed V2 (FSL_OC).

The policy sees sizes and times, never tensors. A *round* (global epoch, CSE-FSL spec §2.3): U of the K
clients (all of them when U = K) download x_c (+ a_c), train whole local epochs, upload their models; once
every participant's model has arrived the server aggregates (eq. 14) and the next round starts at once.

Local-loss methods (CSE-FSL, FSL_AN), per participating client k, from its download::

    download(model)  →  chunk₁ … chunk_c  →  model upload
    chunk  = the batches up to and including the next uploaded one;
             compute Σ_j (F_c + F_a + F_a' + F_c')·b_j / f_k
    upload (smashed, labels) of that batch starts when its forward pass is done (or after the recomputation)
           and when k's uplink is free (uploads of one client are sent one after the other; the client keeps
           training meanwhile: it never waits for the server)                        → ``smashed`` event
    server on arrival: one step on x_s (FIFO over all clients; busy for (F_s + F_s')·b / f_server when the
           server has a rate), or, with ``server_order`` = round_robin / random, in that fixed order
    after the last chunk of an aggregation segment, the model upload                  → ``model`` event

Gradient methods (FSL_MC, FSL_OC), per batch (as GAS): forward + upload → server step (FIFO) → gradient
download → backward; after the last batch the model upload.

Every duration comes from :class:`raysfl.system.durations.TimeModel` and the measured model (FLOPs per
sample, activation bytes, state-dict bytes). The event log holds one row per download, upload and model
upload with the bytes of the message (``bytes_labels`` = the label part of ``bytes_up``); the server counts
the same messages from the tensors it receives and sends (``FSLServer.evaluate``), and the two agree.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from raysfl.algorithms.actions import CLIENT, SERVER, Action, Call, Event, Log, Schedule, Slot, Stop
from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.common.aux_client import AuxClient
from raysfl.algorithms.common.fsl_accounting import LABEL_BYTES, tensor_bytes
from raysfl.algorithms.common.fsl_round import (
    FSLRules,
    chunks,
    round_batch_sizes,
    round_lr,
    segments,
    upload_batches,
)
from raysfl.algorithms.common.fsl_server import FSLServer
from raysfl.algorithms.common.fsl_split_client import FSLSplitClient
from raysfl.algorithms.common.schedule import eval_due, eval_slot, evaluate, finish_job, out_of_time
from raysfl.config import ConfigError


@dataclass(frozen=True)
class FSLCosts:
    """Per-sample FLOPs of each pass and the bytes of each message (measured on the actual model)."""

    client_forward_flops: float
    client_backward_flops: float
    aux_forward_flops: float
    aux_backward_flops: float
    server_forward_flops: float
    server_backward_flops: float  # as the server runs it: to the weights alone with a local loss
    activation_bytes: int  # one sample's smashed data (= its gradient)
    model_bytes: int  # state dict of x_c (+ a_c): one model download or upload
    label_bytes: int = LABEL_BYTES

    @classmethod
    def measure(cls, setup: RunSetup, profile: Any, local_loss: bool) -> FSLCosts:
        """From the :class:`ModelProfile` plus the state-dict bytes of the model built on the meta device."""
        from raysfl.models.zoo import build_split_model

        c, h, _ = setup.input_shape
        with torch.device("meta"):
            model = build_split_model(setup.scenario.model, c, h, setup.num_classes, seed=0)
        model_bytes = tensor_bytes(model.client.state_dict())
        if local_loss:
            assert model.aux is not None  # a local-loss rule builds the auxiliary head
            model_bytes += tensor_bytes(model.aux.state_dict())
        return cls(
            client_forward_flops=float(profile.client_forward_flops),
            client_backward_flops=float(profile.client_backward_flops),
            aux_forward_flops=float(profile.aux_forward_flops) if local_loss else 0.0,
            aux_backward_flops=float(profile.aux_backward_flops) if local_loss else 0.0,
            server_forward_flops=float(profile.server_forward_flops),
            # a local-loss server step (CSE-FSL, FSL_AN, eq. 11) returns no gradient: its backward stops at
            # the weights; the gradient methods send ∇_A back, so theirs computes both
            server_backward_flops=float(
                profile.server_weight_grad_flops if local_loss else profile.server_backward_flops
            ),
            activation_bytes=int(profile.activation_bytes),
            model_bytes=int(model_bytes),
        )

    def upload_bytes(self, batch: int) -> int:
        """Smashed data and labels of a minibatch."""
        return batch * (self.activation_bytes + self.label_bytes)


@dataclass
class ClientRound:
    """One participant's plan for the current round."""

    sizes: list[int]  # minibatch sizes, in order
    uploads: list[int]  # uploaded batch indices m
    segs: list[tuple[int, int]]  # batch ranges between aggregations
    version: int = 0  # global model version at the client's last download
    chunk_list: list[tuple[int, int, bool]] = field(default_factory=list)
    chunk: int = 0


class FSLPolicy:
    """Round-based scheduling of the four methods; :class:`FSLRules` selects the method."""

    # grid cell of the latest global iteration for train.eval_every_s (schedule.eval_slot); a class default,
    # so checkpoints taken before the option existed resume with it
    eval_cell = 0

    def __init__(
        self, setup: RunSetup, rules: FSLRules, time: Any, costs: FSLCosts, rng: np.random.Generator
    ) -> None:
        self.setup = setup
        self.rules = rules
        self.train = setup.scenario.train
        self.fed = setup.scenario.federation
        self.time = time
        self.costs = costs
        self.rng = rng
        self.round = 0  # rounds completed
        self.version = 0  # aggregations so far
        self.segment = 0
        self.num_segments = 1
        self.lr = self.train.lr
        self.plans: dict[int, ClientRound] = {}
        self.waiting: set[int] = set()
        self.server_free_at = 0.0
        self.uplink_free = [0.0] * setup.num_clients
        self.order: list[tuple[int, int]] = []  # server_order != arrival_time: the prescribed sequence
        self.order_pos = 0
        self.pending: dict[tuple[int, int], tuple[int, int, int, float, int]] = {}
        c = costs
        self.batch_flops = (
            c.client_forward_flops + c.aux_forward_flops + c.aux_backward_flops + c.client_backward_flops
        )
        self.server_flops = c.server_forward_flops + c.server_backward_flops
        self._check_client_rounds()

    def _check_client_rounds(self) -> None:
        """Every client has a minibatch each round and, with a local loss, at least one upload.

        Raises:
            ConfigError: a client without a minibatch (``drop_last`` with fewer samples than B), or an h
                larger than every client's batches per round: nothing would ever reach the server.
        """
        rules, b = self.rules, self.train.batch_size
        batches = {}
        for k in range(self.setup.num_clients):
            n = self.setup.client_size(k)
            batches[k] = len(round_batch_sizes(n, b, rules.drop_last, rules.local_epochs))
            if not batches[k]:
                raise ConfigError(
                    [
                        f"train.batch_size: client {k} holds {n} samples, fewer than train.batch_size = {b}, "
                        "and algorithm.params.drop_last = true leaves it no minibatch; lower the batch size "
                        "or set drop_last = false"
                    ]
                )
        if not rules.local_loss:
            return
        silent = [k for k, nb in batches.items() if not upload_batches(nb, rules.h, rules.upload_rule)]
        if not silent:
            return
        fewest, most = min(batches[k] for k in silent), max(batches[k] for k in silent)
        counts = f"{fewest}" if fewest == most else f"{fewest}–{most}"
        why = (
            f"algorithm.params.h: h = {rules.h} exceeds the {counts} minibatches a round "
            f"(local_epochs · ⌈|D_i|/B⌉) of {len(silent)} of the {len(batches)} clients, which never upload "
            "smashed data with upload_rule = 'last_of_window'"
        )
        if len(silent) == len(batches):
            raise ConfigError([f"{why}: the server would never train; use h ≤ {max(batches.values())}"])
        print(f"raysfl: warning: {why}; their rounds train only the client side", file=sys.stderr)

    # --- the policy protocol ---------------------------------------------------------------------------
    def start(self) -> list[Action]:
        """Evaluate the initial model; start round 1."""
        return [*evaluate(0, 0.0), *self._start_round(0.0)]

    def on_event(self, ev: Event) -> list[Action]:
        """``chunk`` (next client call), ``smashed`` (an upload arrives), ``model`` (a model arrives)."""
        if ev.kind == "chunk":
            return self._chunk(ev.client, ev.t)
        if ev.kind == "smashed":
            return self._on_smashed(ev) if self.rules.local_loss else self._on_smashed_grad(ev)
        if ev.kind == "model":
            return self._on_model(ev)
        raise RuntimeError(f"{self.rules.method} policy got an unknown event kind {ev.kind!r}")

    # --- rounds -------------------------------------------------------------------------------------------
    def _participants(self) -> list[int]:
        k, u = self.setup.num_clients, self.fed.active_clients
        if u >= k:
            return list(range(k))
        if self.rules.client_sampling == "fixed":
            return list(range(u))
        return sorted(int(c) for c in self.rng.choice(k, size=u, replace=False))

    def _start_round(self, t: float) -> list[Action]:
        r, rules, b = self.round, self.rules, self.train.batch_size
        self.lr = round_lr(self.train.lr, rules.lr_decay, rules.lr_decay_every, r)
        parts = self._participants()
        self.plans = {}
        for k in parts:
            n = self.setup.client_size(k)
            sizes = round_batch_sizes(n, b, rules.drop_last, rules.local_epochs)  # never empty (__init__)
            if rules.local_loss:
                ups = upload_batches(len(sizes), rules.h, rules.upload_rule)
                segs = segments(len(sizes), rules.agg_every_batches)
            else:
                ups, segs = list(range(len(sizes))), [(0, len(sizes))]
            self.plans[k] = ClientRound(sizes, ups, segs)
        self.num_segments = max(len(p.segs) for p in self.plans.values())
        self.segment = 0
        self._plan_server_order(parts)
        actions: list[Action] = [Call(SERVER, FSLServer.begin_round, (tuple(parts), r))]
        return actions + self._start_segment(t)

    def _plan_server_order(self, parts: list[int]) -> None:
        """The fixed order of ``round_robin`` (client 0 window 0, client 1 window 0, …) or ``random``."""
        self.order, self.order_pos, self.pending = [], 0, {}
        if not self.rules.local_loss or self.rules.server_order == "arrival_time":
            return
        windows = max(len(self.plans[k].uploads) for k in parts)
        for w in range(windows):
            having = [k for k in parts if w < len(self.plans[k].uploads)]
            if self.rules.server_order == "random":
                having = [having[i] for i in self.rng.permutation(len(having))]
            self.order += [(k, self.plans[k].uploads[w]) for k in having]

    def _start_segment(self, t: float) -> list[Action]:
        actions: list[Action] = []
        self.waiting = set()
        for k in sorted(self.plans):
            if self.segment < len(self.plans[k].segs):
                self.waiting.add(k)
                actions += self._download(k, t)
        return actions

    def _download(self, k: int, t: float) -> list[Action]:
        """Step 1: x_c (+ a_c) goes down; then the first chunk (local loss) or the first forward + upload."""
        plan, c = self.plans[k], self.costs
        plan.version = self.version
        t_dl = t + self.time.download_s(k, c.model_bytes)
        g = Slot(("global", k))
        actions: list[Action] = [
            Call(SERVER, FSLServer.send_model, (k,), out=g),
            Log(
                {
                    "t": t,
                    "kind": "download",
                    "client": k,
                    "bytes_down": c.model_bytes,
                    "version": self.version,
                }
            ),
        ]
        if self.rules.local_loss:
            a, b = plan.segs[self.segment]
            plan.chunk_list, plan.chunk = chunks(a, b, set(plan.uploads)), 0
            actions.append(Call(CLIENT, AuxClient.load, (g, self.lr), client=k, free=(g,), pace_s=t_dl - t))
            return actions + self._chunk(k, t_dl)
        b0 = plan.sizes[0]
        t_up = (
            t_dl
            + self.time.compute_s(k, c.client_forward_flops, b0)
            + self.time.upload_s(k, c.upload_bytes(b0))
        )
        return actions + [
            Call(
                CLIENT,
                FSLSplitClient.start,
                (g, self.lr),
                client=k,
                out=Slot(("up", k)),
                free=(g,),
                pace_s=t_up - t,
            ),
            Schedule(t_up, "smashed", k, {"j": 0, "awaits": ("up", k)}),
        ]

    # --- local-loss methods ------------------------------------------------------------------------
    def _chunk(self, k: int, t: float) -> list[Action]:
        """Run the next chunk of client ``k`` from ``t``; schedule its upload and what follows."""
        plan, c, tm = self.plans[k], self.costs, self.time
        a, b, up = plan.chunk_list[plan.chunk]
        plan.chunk += 1
        per_batch = [tm.compute_s(k, self.batch_flops, plan.sizes[m]) for m in range(a, b)]
        last = plan.sizes[b - 1]
        recompute = (
            tm.compute_s(k, c.client_forward_flops, last) if up and self.rules.recompute_after_update else 0.0
        )
        t_end = t + sum(per_batch) + recompute
        slot = Slot(("up", k, self.round, b - 1)) if up else None
        actions: list[Action] = [
            Call(CLIENT, AuxClient.run, (b - a, up), client=k, out=slot, pace_s=t_end - t)
        ]
        if slot is not None:
            if self.rules.recompute_after_update:
                t_ready = t_end
            else:  # the forward pass of the uploaded batch is done
                t_ready = t + sum(per_batch[:-1]) + tm.compute_s(k, c.client_forward_flops, last)
            begin = max(t_ready, self.uplink_free[k])
            t_arr = begin + tm.upload_s(k, c.upload_bytes(last))
            self.uplink_free[k] = t_arr
            data = {"j": b - 1, "b": last, "version": plan.version, "awaits": slot.name}
            actions.append(Schedule(t_arr, "smashed", k, data))
        if plan.chunk < len(plan.chunk_list):
            actions.append(Schedule(t_end, "chunk", k))
            return actions
        begin = max(t_end, self.uplink_free[k])
        t_model = begin + tm.upload_s(k, c.model_bytes)
        self.uplink_free[k] = t_model
        return actions + [
            Call(CLIENT, AuxClient.weights, client=k, out=Slot(("model", k)), pace_s=t_model - t_end),
            Schedule(t_model, "model", k, {"awaits": ("model", k)}),
        ]

    def _on_smashed(self, ev: Event) -> list[Action]:
        item = (ev.client, int(ev.data["j"]), int(ev.data["b"]), ev.t, int(ev.data["version"]))
        if not self.order:
            return self._serve(item, ev.t)
        self.pending[(item[0], item[1])] = item
        actions: list[Action] = []
        while self.order_pos < len(self.order) and self.order[self.order_pos] in self.pending:
            actions += self._serve(self.pending.pop(self.order[self.order_pos]), ev.t)
            self.order_pos += 1
        return actions

    def _serve(self, item: tuple[int, int, int, float, int], t: float) -> list[Action]:
        """Eq. 11: one server step on an upload (FIFO on one server processor)."""
        k, j, b, t_arr, version = item
        begin = max(t, self.server_free_at)
        busy = self.time.server_s(self.server_flops, b)
        self.server_free_at = begin + busy
        slot = Slot(("up", k, self.round, j))
        return [
            Call(SERVER, FSLServer.on_smashed, (k, slot, self.lr), free=(slot,), pace_s=busy),
            Log(
                {
                    "t": t,
                    "kind": "upload",
                    "client": k,
                    "e": j,
                    "version": self.version,
                    "staleness": self.version - version,
                    "bytes_up": self.costs.upload_bytes(b),
                    "bytes_labels": b * self.costs.label_bytes,
                    "queue_s": begin - t_arr,
                }
            ),
        ]

    # --- gradient methods --------------------------------------------------------------------------
    def _on_smashed_grad(self, ev: Event) -> list[Action]:
        """Server step, gradient download, backward; then the next forward + upload or the model upload."""
        k, t, j = ev.client, ev.t, int(ev.data["j"])
        plan, c, tm = self.plans[k], self.costs, self.time
        b = plan.sizes[j]
        begin = max(t, self.server_free_at)
        busy = tm.server_s(self.server_flops, b)
        self.server_free_at = done = begin + busy
        g = Slot(("grad", k))
        actions: list[Action] = [
            Call(SERVER, FSLServer.on_smashed, (k, Slot(("up", k)), self.lr), out=g, pace_s=busy),
            Log(
                {
                    "t": t,
                    "kind": "upload",
                    "client": k,
                    "e": j,
                    "version": self.version,
                    "staleness": self.version - plan.version,
                    "bytes_up": c.upload_bytes(b),
                    "bytes_labels": b * c.label_bytes,
                    "bytes_down": b * c.activation_bytes,
                    "queue_s": begin - t,
                }
            ),
        ]
        t_back = done + tm.download_s(k, b * c.activation_bytes) + tm.compute_s(k, c.client_backward_flops, b)
        if j + 1 < len(plan.sizes):
            nb = plan.sizes[j + 1]
            t_next = t_back + tm.compute_s(k, c.client_forward_flops, nb) + tm.upload_s(k, c.upload_bytes(nb))
            return actions + [
                Call(CLIENT, FSLSplitClient.step, (g,), client=k, out=Slot(("up", k)), pace_s=t_next - done),
                Schedule(t_next, "smashed", k, {"j": j + 1, "awaits": ("up", k)}),
            ]
        t_model = t_back + tm.upload_s(k, c.model_bytes)
        return actions + finish_job(k, g, done, t_model)

    # --- aggregation --------------------------------------------------------------------------------
    def _on_model(self, ev: Event) -> list[Action]:
        """Buffer the model; when every participant's is in, aggregate and go on (next segment or round)."""
        k, t = ev.client, ev.t
        m = Slot(("model", k))
        actions: list[Action] = [
            Call(SERVER, FSLServer.on_client_model, (k, m, self.setup.client_size(k)), free=(m,)),
            Log(
                {
                    "t": t,
                    "kind": "model",
                    "client": k,
                    "bytes_up": self.costs.model_bytes,
                    "version": self.version,
                    "staleness": self.version - self.plans[k].version,
                }
            ),
        ]
        self.waiting.discard(k)
        if self.waiting:
            return actions
        actions.append(Call(SERVER, FSLServer.aggregate))
        self.version += 1
        actions.append(Log({"t": t, "kind": "aggregate", "version": self.version}))
        self.segment += 1
        if self.segment < self.num_segments:
            return actions + self._start_segment(t)
        if self.pending or self.order_pos < len(self.order):
            raise RuntimeError("invariant broken: a round ended with uploads the server has not consumed")
        self.round += 1
        last = self.round >= self.train.global_iterations
        late = out_of_time(t, self.train)
        # reported at the end of the server's queue: the evaluated x_s has taken every upload of the round
        t_eval = max(t, self.server_free_at)
        due = eval_due(self.round, t_eval, self.train, self.eval_cell)
        self.eval_cell = eval_slot(t_eval, self.train)
        if last or late or due:
            actions += evaluate(self.round, t_eval)
        if last or late:
            return [*actions, Stop("budget reached" if last else "emulated time limit reached")]
        return actions + self._start_round(t)

    def global_iteration(self) -> int:
        """Global iterations completed so far (checkpoints are taken every N of them)."""
        return self.round
