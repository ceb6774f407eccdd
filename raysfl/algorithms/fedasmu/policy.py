"""Virtual-time scheduling of FedASMU (Algorithm 1's trigger thread) and FedSSMU (Algorithm 3's rounds).

Events:
    trigger   (FedASMU) every 𝒯: min(m', idle) idle devices, drawn uniformly, start a training [P] §2.4
    chosen    (RL slots) the device's l*, fetched at the training's start, fixes its request point
    slot      a mid-training request point: the slot's epoch boundary b_l plus δ_req. If the server holds
              a model newer than the training's base, the policy takes a snapshot *now* (one server call
              per new version, shared by every request that sees it) and hands it to the device with the
              call that trains the next epochs. Server calls run in event order, so the snapshot contains
              exactly the aggregations whose arrival events fired before the request (spec §6 A).
    model     an upload arrives: staleness s = v − o + 1, discarded if s > τ (else one aggregation)

A training of device k that starts at s (spec §2.6):

    b_1 = s + t_down,   b_{l+1} = b_l + e_l,   arrival = b_{𝓛+1} + t_up

with e_l the compute time of the l-th epoch (FLOPs of each minibatch / f_k). With a fixed slot
(h1/h2/h3) the training is split into two calls at l*. With ``request_slot = "rl"`` the device chooses l*
from its own rewards when the training starts (``begin``); a ``chosen`` event at the start time fetches
that small value (engine ``fetch``), and the training then runs as with a fixed slot. ``blocking``
downloads delay b_{l*..𝓛+1} by δ_req + t_down when a newer model exists, else by 2δ_req; ``overlap``
keeps the timeline. Either way a sent fresh model is a ``fresh`` row of the event log with its bytes.

FedSSMU: a round draws C of K devices, all start at the round's start with w_{g,0}; the round ends with
the last upload, and the next starts then. Stop after ``train.global_iterations`` aggregations (FedASMU)
or rounds (FedSSMU), or once ``train.max_emulated_s`` has passed at such a step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from raysfl.algorithms.actions import CLIENT, SERVER, Action, Call, Event, Log, Schedule, Slot
from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.common.batching import batch_size_at
from raysfl.algorithms.common.fl_policy import FLCosts
from raysfl.algorithms.common.schedule import after_update, eval_slot, evaluate, start_log
from raysfl.algorithms.fedasmu.client import MUClient
from raysfl.algorithms.fedasmu.server import MUServer


@dataclass
class MUJob:
    """An open training: base version, request points, epoch boundaries, upload time."""

    version: int
    start: float
    points: list[int]
    boundaries: list[float]  # b_1..b_{𝓛+1}
    upload_s: float
    next_point: int = 0


class MUPolicy:
    """Scheduling of FedASMU (``synchronous = False``) and FedSSMU (``True``)."""

    # grid cell of the latest global iteration for train.eval_every_s (schedule.eval_slot); a class default,
    # so checkpoints taken before the option existed resume with it
    eval_cell = 0

    def __init__(
        self, setup: RunSetup, time: Any, costs: FLCosts, rng: np.random.Generator, synchronous: bool
    ) -> None:
        self.setup = setup
        self.p = setup.params
        self.train = setup.scenario.train
        self.m_prime = setup.scenario.federation.active_clients
        self.time = time
        self.costs = costs
        self.rng = rng
        self.synchronous = synchronous
        k = setup.num_clients
        if self.m_prime > k:
            raise ValueError(f"active_clients m' = {self.m_prime} exceeds num_clients K = {k}")
        self.active: dict[int, MUJob] = {}
        self.idle: set[int] = set(range(k))
        self.steps = [0] * k
        self.version = 0  # aggregations so far (discards excluded)
        self.arrivals = 0
        self.round = 0
        self.round_left: set[int] = set()
        self.snapshot: tuple[int, Slot] | None = None
        self.stopped = False

    # --- durations -------------------------------------------------------------------------------
    def epoch_steps(self, k: int) -> int:
        """Minibatch steps per local epoch: ``epoch_steps`` or one pass over D_k."""
        if self.p.epoch_steps > 0:
            return self.p.epoch_steps
        return -(-self.setup.client_size(k) // self.train.batch_size)

    def epoch_times(self, k: int) -> list[float]:
        """e_1..e_𝓛 of device k's next training; advances its minibatch counter.

        With ``system.compute.training_time = "per-device"`` each epoch is charged as a pass over mean-size
        data, so the devices' training times differ by their slowdowns alone (§6.1.4) [P]: see
        :meth:`mean_pass_share`. An epoch of ``epoch_steps`` minibatches is a fixed amount of work whatever
        |D_k|, so it is charged as it is in either mode, like the fixed-step jobs of the baselines.
        """
        n, b = self.setup.client_size(k), self.train.batch_size
        flops = self.costs.forward_flops + self.costs.backward_flops
        scale = 1.0
        if self.setup.scenario.system.compute.training_time == "per-device" and self.p.epoch_steps == 0:
            scale = self.mean_pass_share(k)
        out = []
        for _ in range(self.p.local_epochs):
            e = 0.0
            for _ in range(self.epoch_steps(k)):
                e += self.time.compute_s(k, flops, batch_size_at(self.steps[k], n, b))
                self.steps[k] += 1
            out.append(e * scale)
        return out

    def mean_pass_share(self, k: int) -> float:
        """A pass over mean-size data, mean_j |D_j|, over a pass over D_k, in the units the clock charges.

        Per-batch FLOP accounting charges a pass over D_k its |D_k| samples, so the share is
        mean_j |D_j| / |D_k|. Per-sample accounting (the GAS code's clock) charges one sample a minibatch
        step, so a pass over D_k costs ⌈|D_k|/B⌉ and a mean-size pass mean_j |D_j| / B of them.
        """
        mean, n, b = self.setup.mean_client_size, self.setup.client_size(k), self.train.batch_size
        if self.setup.scenario.system.timing.flops_accounting == "per-sample":
            return (mean / b) / self.epoch_steps(k)
        return mean / max(n, 1)

    def learning_rate(self) -> float:
        """η_i = η·decay^j, j = rounds so far (sync) or completed groups of m' aggregations (async) [A]."""
        j = self.round - 1 if self.synchronous else self.version // self.m_prime
        return self.train.lr * self.p.lr_decay ** max(j, 0)

    def request_points(self) -> list[int]:
        """The epoch at whose start the device asks for the newest model (RL: known once it has chosen)."""
        p = self.p
        if p.request_slot in ("none", "rl"):
            return []
        return [p.slot_for(p.request_slot)]

    # --- trainings -------------------------------------------------------------------------------
    def _start_job(self, k: int, t: float) -> list[Action]:
        self.idle.discard(k)
        down = self.time.download_s(k, self.costs.model_bytes)
        bounds = [t + down]
        for e in self.epoch_times(k):
            bounds.append(bounds[-1] + e)
        points = self.request_points()
        job = MUJob(self.version, t, points, bounds, self.time.upload_s(k, self.costs.model_bytes))
        self.active[k] = job
        info = {
            "lr": self.learning_rate(),
            "epoch_steps": self.epoch_steps(k),
            "boundaries": list(bounds),
            "fresh_delay": self.p.request_latency_s + down,
            "mode": self.p.fresh_download,
            "model_bytes": self.costs.model_bytes,
        }
        base = Slot(("w0", k))
        log = start_log(t, k, self.costs.model_bytes, self.version)
        actions: list[Action] = [Call(SERVER, MUServer.send_job, (k, self.round), out=base)]
        if self.p.request_slot == "rl":
            # l* comes from the device's own rewards: read it before timing the request (and the rest).
            chosen = Slot(("lstar", k))
            begin = Call(
                CLIENT, MUClient.begin, (base, info), client=k, out=chosen, free=(base,), pace_s=down
            )
            return [*actions, begin, log, Schedule(t, "chosen", k, {"fetch": chosen.name})]
        last = points[0] - 1 if points else self.p.local_epochs
        model = Slot(("model", k))
        actions += [
            Call(
                CLIENT,
                MUClient.start,
                (base, info, last),
                client=k,
                out=model if not points else None,
                free=(base,),
                pace_s=bounds[last] - t,
            ),
            log,
        ]
        return actions + self._next(k, job)

    def _on_chosen(self, ev: Event) -> list[Action]:
        """RL mode: the device's l* is known (``ev.data["value"]``); train up to it, then as a fixed slot."""
        k, job = ev.client, self.active[ev.client]
        slot = ev.data["value"]
        job.points = [int(slot)] if slot is not None else []
        last = job.points[0] - 1 if job.points else self.p.local_epochs
        if last == 0:
            return self._next(k, job)
        model = Slot(("model", k))
        train = Call(
            CLIENT,
            MUClient.epochs,
            (1, last, None),
            client=k,
            out=model if last == self.p.local_epochs else None,
            pace_s=job.boundaries[last] - job.boundaries[0],
        )
        return [train, *self._next(k, job)]

    def _next(self, k: int, job: MUJob) -> list[Action]:
        """Schedule the job's next request point, or its upload once epoch 𝓛 is dispatched."""
        if job.next_point < len(job.points):
            slot = job.points[job.next_point]
            at = job.boundaries[slot - 1] + self.p.request_latency_s
            return [Schedule(at, "slot", k, {"l": slot})]
        return [Schedule(job.boundaries[-1] + job.upload_s, "model", k, {"awaits": ("model", k)})]

    def _on_slot(self, ev: Event) -> list[Action]:
        k, t, slot = ev.client, ev.t, int(ev.data["l"])
        job = self.active[k]
        job.next_point += 1
        actions: list[Action] = []
        offer = None
        newer = self.version > job.version
        if newer:
            if self.snapshot is None or self.snapshot[0] != self.version:
                old = (self.snapshot[1],) if self.snapshot is not None else ()
                snap = Slot(("fresh", self.version))
                actions.append(Call(SERVER, MUServer.fresh_model, out=snap, free=old))
                self.snapshot = (self.version, snap)
            offer = self.snapshot[1]
        actions += self._fresh_download(k, job, slot, t, newer)
        last = job.points[job.next_point] - 1 if job.next_point < len(job.points) else self.p.local_epochs
        model = Slot(("model", k))
        actions.append(
            Call(
                CLIENT,
                MUClient.epochs,
                (slot, last, offer),
                client=k,
                out=model if last == self.p.local_epochs else None,
                pace_s=job.boundaries[last] - job.boundaries[slot - 1],
            )
        )
        return actions + self._next(k, job)

    def _fresh_download(self, k: int, job: MUJob, slot: int, t: float, newer: bool) -> list[Action]:
        """At l*: shift the rest of the timeline (blocking) and log the fresh download's bytes."""
        p = self.p
        down = self.time.download_s(k, self.costs.model_bytes)
        if p.fresh_download == "blocking":
            shift = p.request_latency_s + down if newer else 2 * p.request_latency_s
            job.boundaries[slot - 1 :] = [b + shift for b in job.boundaries[slot - 1 :]]
            sent = newer
        else:
            arrival = job.boundaries[slot - 1] + (p.request_latency_s + down)  # as the device computes it
            sent = newer and arrival <= job.boundaries[p.local_epochs - 1]
        if not sent:
            return []
        row = {
            "t": t,
            "kind": "fresh",
            "client": k,
            "bytes_down": self.costs.model_bytes,
            "version": self.version,
        }
        return [Log(row)]

    def _on_model(self, ev: Event) -> list[Action]:
        k, t = ev.client, ev.t
        job = self.active.pop(k)
        s = self.version - job.version + 1
        discard = s > self.p.tau
        self.arrivals += 1
        row: dict[str, Any] = {
            "t": t,
            "kind": "model",
            "client": k,
            "bytes_up": self.costs.model_bytes,
            "staleness": s - 1,
            "version": self.version,
            "discarded": int(discard),
        }
        model = Slot(("model", k))
        actions: list[Action] = [
            Call(SERVER, MUServer.on_client_model, (k, model, self.setup.client_size(k)), free=(model,)),
            Log(row),
        ]
        if not discard:
            self.version += 1
            row["server_update"] = 1
        if self.synchronous:
            self.idle.add(k)
            self.round_left.discard(k)
            if self.round_left:
                return actions
            more, stop = after_update(self.round, t, self.train, last_slot=self.eval_cell)
            self.eval_cell = eval_slot(t, self.train)
            actions += more
            if stop:
                return actions
            return actions + self._start_round(t)
        self.idle.add(k)
        if not discard:
            actions += after_update(self.version, t, self.train, last_slot=self.eval_cell)[0]
            self.eval_cell = eval_slot(t, self.train)
        return actions

    def _on_trigger(self, ev: Event) -> list[Action]:
        """Algorithm 1 lines 2-7: m' random idle devices start; the next trigger in 𝒯."""
        n = min(self.m_prime, len(self.idle))
        cap = self.p.max_concurrency
        if cap > 0:
            n = max(0, min(n, cap - len(self.active)))
        actions: list[Action] = []
        if n > 0:
            for k in sorted(int(c) for c in self.rng.choice(sorted(self.idle), size=n, replace=False)):
                actions += self._start_job(k, ev.t)
        return [*actions, Schedule(ev.t + self.p.trigger_period, "trigger")]

    def _start_round(self, t: float) -> list[Action]:
        """Algorithm 3: round g + 1 draws m' of all K devices; each starts from w_{g+1,0}."""
        self.round += 1
        chosen = sorted(
            int(c) for c in self.rng.choice(self.setup.num_clients, size=self.m_prime, replace=False)
        )
        self.round_left = set(chosen)
        actions: list[Action] = []
        for k in chosen:
            actions += self._start_job(k, t)
        return actions

    def global_iteration(self) -> int:
        """Global iterations so far: completed rounds (FedSSMU) or aggregations (FedASMU); for checkpoints."""
        if self.synchronous:
            return self.round - (1 if self.round_left else 0)
        return self.version

    # --- the policy protocol ---------------------------------------------------------------------
    def start(self) -> list[Action]:
        """Evaluate w_0; FedASMU triggers at t = 0, FedSSMU starts round 1."""
        actions = evaluate(0, 0.0)
        if self.synchronous:
            return actions + self._start_round(0.0)
        return [*actions, Schedule(0.0, "trigger")]

    def on_event(self, ev: Event) -> list[Action]:
        """Dispatch ``trigger``, ``slot`` and ``model`` events."""
        if ev.kind == "trigger":
            return self._on_trigger(ev)
        if ev.kind == "chosen":
            return self._on_chosen(ev)
        if ev.kind == "slot":
            return self._on_slot(ev)
        if ev.kind == "model":
            return self._on_model(ev)
        raise RuntimeError(f"FedASMU policy got an unknown event kind {ev.kind!r}")
