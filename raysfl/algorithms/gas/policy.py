"""GAS scheduling in virtual time (Algorithms 1-2; time model: docs/architecture.md, GAS spec §10.2-10.3).

The policy sees times, ids and sizes only, never tensors. Per client job (E local iterations):

    start    download w_c (free with ``free_downloads``), forward, upload A_k and Y_k    → ``act`` event
    act      the server handles A_k (FIFO; server compute costs time only when the server has a rate;
             G_k leaves after the buffer's update in Alg. 1's order, before it in the code's), G_k
             downloads, the client back-propagates; then either the next forward + upload
             (→ ``act``) or, after the E-th iteration, the client-side model upload     → ``model`` event
    model    the model buffer takes w_{c,k}; every Q_c models one aggregation = one global iteration;
             an idle client, drawn uniformly from those not active, starts at once (§10.2); with
             C = K none is idle and the client that finished starts again

Durations come from :class:`raysfl.system.durations.TimeModel`; FLOPs and bytes from the measured model
(:class:`SplitCosts`), or the reference code's constants where ``system.timing`` sets them
(:meth:`SplitCosts.charged`). The run stops after T aggregations (or at ``train.max_emulated_s``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from raysfl.algorithms.actions import CLIENT, SERVER, Action, Call, Event, Log, Schedule, Slot
from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.common.batching import batch_size_at
from raysfl.algorithms.common.costs import SplitCosts
from raysfl.algorithms.common.schedule import after_update, eval_slot, evaluate, finish_job, start_log
from raysfl.algorithms.common.split_client import SplitClient
from raysfl.algorithms.gas.server import GASServer

GLOBAL = Slot(("global_client",))


@dataclass
class Job:
    """One client's current job: the model version it started from and its local iteration e."""

    version: int
    e: int = 1


class GASPolicy:
    """Decides what happens when, for GAS and plain async SFL (``generate = false``)."""

    # grid cell of the latest global iteration for train.eval_every_s (schedule.eval_slot); a class default,
    # so checkpoints taken before the option existed resume with it
    eval_cell = 0

    def __init__(self, setup: RunSetup, time: Any, costs: SplitCosts, rng: np.random.Generator) -> None:
        self.setup = setup
        self.p = setup.params
        self.train = setup.scenario.train
        self.fed = setup.scenario.federation
        self.time = time
        self.costs = costs.charged(setup.scenario.system.timing, self.train.batch_size)
        self.rng = rng
        self.active: dict[int, Job] = {}
        self.idle: list[int] = list(range(setup.num_clients))
        self.steps = [0] * setup.num_clients  # minibatches drawn by each client so far (batch sizes)
        self.version = 0  # aggregations so far = global iteration
        self.models_in_buffer = 0
        self.server_free_at = 0.0
        self.buffer_clients: list[int] = []
        self.buffer_samples = 0
        self.speed_class = self._speed_classes()

    # --- helpers -------------------------------------------------------------------------------------
    def _speed_classes(self) -> np.ndarray:
        """+1 for the fastest quarter of devices, −1 for the slowest quarter, 0 otherwise.

        Ranked by nominal time per local iteration; used to report who fills the activation buffer.
        """
        b, c = self.train.batch_size, self.costs
        per_iter = np.array(
            [
                self.time.compute_s(k, c.client_forward_flops + c.client_backward_flops, b)
                + self.time.upload_s(k, c.upload_bytes(b))
                + self.time.download_s(k, c.gradient_bytes(b))
                for k in range(self.setup.num_clients)
            ]
        )
        lo, hi = np.quantile(per_iter, [0.25, 0.75])
        return np.where(per_iter <= lo, 1, np.where(per_iter >= hi, -1, 0))

    def _next_batch(self, k: int) -> int:
        b = batch_size_at(self.steps[k], self.setup.client_size(k), self.train.batch_size)
        self.steps[k] += 1
        return b

    def _forward_upload_s(self, k: int, b: int) -> float:
        c = self.costs
        return self.time.compute_s(k, c.client_forward_flops, b) + self.time.upload_s(k, c.upload_bytes(b))

    def _start_job(self, k: int, t: float) -> list[Action]:
        self.active[k] = Job(version=self.version)
        b = self._next_batch(k)
        t_act = t + self.time.download_s(k, self.costs.client_model_bytes) + self._forward_upload_s(k, b)
        return [
            Call(CLIENT, SplitClient.start, (GLOBAL,), client=k, out=Slot(("acts", k)), pace_s=t_act - t),
            Schedule(t_act, "act", k, {"b": b, "awaits": ("acts", k)}),
            start_log(t, k, self.costs.client_model_bytes, self.version),
        ]

    # --- the policy protocol ---------------------------------------------------------------------------
    def start(self) -> list[Action]:
        """Evaluate the initial model and start C clients drawn uniformly without replacement."""
        actions: list[Action] = [
            Call(SERVER, GASServer.client_weights, out=GLOBAL),
            *evaluate(0, 0.0),
        ]
        chosen = self.rng.choice(self.idle, size=self.fed.active_clients, replace=False)
        for k in sorted(int(c) for c in chosen):
            self.idle.remove(k)
            actions += self._start_job(k, 0.0)
        return actions

    def on_event(self, ev: Event) -> list[Action]:
        """Dispatch an ``act`` or ``model`` event."""
        if ev.kind == "act":
            return self._on_activations(ev)
        if ev.kind == "model":
            return self._on_model(ev)
        raise RuntimeError(f"GAS policy got an unknown event kind {ev.kind!r}")

    def _on_activations(self, ev: Event) -> list[Action]:
        k, t, b = ev.client, ev.t, int(ev.data["b"])
        job, c = self.active[k], self.costs
        begin = max(t, self.server_free_at)
        busy = self.time.server_s(c.gradient_pass_flops, b)  # G_k = ∇_A l(w_s; A_k, Y_k)
        self.buffer_clients.append(k)
        self.buffer_samples += b
        row: dict[str, Any] = {
            "t": t,
            "kind": "act",
            "client": k,
            "e": job.e,
            "bytes_up": c.upload_bytes(b),
            "bytes_down": c.gradient_bytes(b),
            "staleness": self.version - job.version,
            "version": self.version,
            "queue_s": begin - t,
        }
        gradient_ready = begin + busy  # before-gradient mode moves it behind the update below
        if len(self.buffer_clients) == self.p.q_s:  # this arrival fills the buffer: one server update
            busy += self.time.server_s(c.update_pass_flops, self.buffer_samples)  # eq. (5) on the buffer
            if self.p.server_update == "before-gradient":  # Alg. 1: w_s steps, then G_k
                gradient_ready = begin + busy
            classes = self.speed_class[self.buffer_clients]
            row.update(
                server_update=1,
                share_fast=float(np.mean(classes == 1)),
                share_slow=float(np.mean(classes == -1)),
            )
            self.buffer_clients, self.buffer_samples = [], 0
        self.server_free_at = begin + busy
        t_back = (
            gradient_ready
            + self.time.download_s(k, c.gradient_bytes(b))
            + self.time.compute_s(k, c.client_backward_flops, b)
        )
        done = gradient_ready
        actions: list[Action] = [
            Call(
                SERVER,
                GASServer.on_activations,
                (k, Slot(("acts", k)), job.version, job.e),
                out=Slot(("grads", k)),
                pace_s=busy,
            ),
            Log(row),
        ]
        if job.e < self.train.local_iterations:
            job.e += 1
            nb = self._next_batch(k)
            t_next = t_back + self._forward_upload_s(k, nb)
            actions += [
                Call(
                    CLIENT,
                    SplitClient.step,
                    (Slot(("grads", k)),),
                    client=k,
                    out=Slot(("acts", k)),
                    pace_s=t_next - done,
                ),
                Schedule(t_next, "act", k, {"b": nb, "awaits": ("acts", k)}),
            ]
        else:
            t_model = t_back + self.time.upload_s(k, c.client_model_bytes)
            actions += finish_job(k, Slot(("grads", k)), done, t_model)
        return actions

    def _on_model(self, ev: Event) -> list[Action]:
        k, t = ev.client, ev.t
        job = self.active.pop(k)
        actions: list[Action] = [
            Call(
                SERVER,
                GASServer.on_client_model,
                (k, Slot(("model", k)), self.setup.client_size(k)),
                out=GLOBAL,
                free=(Slot(("model", k)), Slot(("grads", k)), Slot(("acts", k))),
            ),
            Log(
                {
                    "t": t,
                    "kind": "model",
                    "client": k,
                    "bytes_up": self.costs.client_model_bytes,
                    "staleness": self.version - job.version,
                    "version": self.version,
                }
            ),
        ]
        self.models_in_buffer += 1
        if self.models_in_buffer == self.p.q_c:
            self.models_in_buffer = 0
            self.version += 1
            more, stop = after_update(self.version, t, self.train, last_slot=self.eval_cell)
            self.eval_cell = eval_slot(t, self.train)
            actions += more
            if stop:
                return actions
        if self.idle:
            j = int(self.rng.choice(self.idle))
            self.idle.remove(j)
            self.idle.append(k)
        else:  # C = K: every other client is training, so the one that finished is the one to start
            j = k
        return actions + self._start_job(j, t)

    # --- checkpoints --------------------------------------------------------------------------------------
    def global_iteration(self) -> int:
        """Global iterations completed so far (checkpoints are taken every N of them)."""
        return self.version
