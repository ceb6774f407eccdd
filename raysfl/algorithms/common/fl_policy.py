"""Virtual-time scheduling of the FL baselines (FedAvg, FedAsync, FedBuff, CA2FL); GAS spec §10.2-10.3.

A client job is one whole local training run on the full model, so the policy needs two events:

    start    the server sends w (download of the full model), the client runs E minibatch steps
             (forward + backward of the full model each), then uploads w_k              → ``model`` event
    model    the server takes w_k; every ``per_update`` arrivals the global model changes once (one global
             iteration: a FedAvg round, a FedAsync mix, a FedBuff/CA2FL buffer flush)
    refill   start new jobs for the clients that finished at this instant

Job duration of client k (``TimeModel``, DESIGN "The time model"):

    T_k = download(|w|) + Σ_{e=1..E} (F_fwd + F_bwd)·b_e / f_k + upload(|w|)

with F the full model's measured FLOPs per sample, b_e the size of the e-th minibatch (the cursor's epoch
remainder may be smaller than B; 1 under per-sample accounting) and |w| the bytes of all parameters and
buffers. The GAS code charges E·2·W/f_k + bits/R_k (GAS spec §10.3): ``flops_accounting = "per-sample"``
and ``free_downloads = true``.

**Synchronous** (FedAvg): every round samples C of K clients uniformly without replacement from the policy
stream; the round ends when the last of them has arrived (round time = max job time), then the next round's
clients are drawn. **Asynchronous** (FedAsync, FedBuff, CA2FL): C jobs run at all times; every finished
client is replaced at its arrival time by a client drawn uniformly from those not training, excluding the
ones that just finished (the GAS code's ``replace_user`` [C], GAS spec §10.2) or not (``replacement =
"any"``). The draw happens in a ``refill`` event at the same virtual time, which the queue orders after
every arrival already due at that instant, so simultaneous arrivals are all applied before their
replacements start and are replaced by one draw without replacement.

Options of single methods (all off by default, so FedAvg/FedAsync/FedBuff/CA2FL are unchanged):
``discard_above`` τ₀: an arrival staler than τ₀ versions is dropped and does not count towards the next
global update (FedSA's staleness threshold); ``hold_above`` b: a due global update waits while a running
job is more than b versions old, so no update arrives staler than b + 1 (PORT's staleness bound), and the
server is told to aggregate by a ``flush`` call (``server_flush``); ``job_lr``: a learning-rate factor for
each new job, passed to the client's ``train`` (FedSA's frequency-adjusted local learning rate). Subclasses
may override ``_job_lr`` (ASO-Fed's dynamic step size) and ``_job_steps``, a job's number of local steps
when fewer than E (FedProx's stragglers); such a job's compute time counts only the steps it runs. A
subclass with ``deferred = True`` has each job trained only when its model is due, and ``_on_hold`` may
then cut a running job short while a due update is held (PORT's urgent requests). ``aliased_base``
reproduces the GAS code's CA2FL (GAS spec §10.10 [C]): every slot refilled after the start holds a
*reference* to the global model, so such a job trains, when it is due, from the global model of that
moment (staleness 0); the C jobs started at time 0 keep their copy of the initial model. The job's times
and bytes are those of a job that downloaded its model at its start, as the code charges them.

The run stops after ``train.global_iterations`` global iterations or once ``train.max_emulated_s`` has passed
at a global iteration; the initial model and every ``train.eval_every``-th (and the last) iteration are
evaluated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Protocol

import numpy as np

from raysfl.algorithms.actions import CLIENT, SERVER, Action, Call, Event, Log, Schedule, Slot
from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.common.batching import batch_size_at
from raysfl.algorithms.common.fl_client import FLClient
from raysfl.algorithms.common.fl_server import FLServer
from raysfl.algorithms.common.schedule import after_update, eval_slot, evaluate, start_log


class FlushingServer(Protocol):
    """A server that aggregates only when told to (``server_flush``: PORT's server)."""

    def flush(self) -> None:
        """Aggregate what the server has buffered since the last flush."""
        ...


@dataclass(frozen=True)
class FLCosts:
    """Per-sample FLOPs of the full model and the bytes of one model transfer (float32 on the wire)."""

    forward_flops: float
    backward_flops: float
    model_bytes: int  # parameters + buffers of client part + server part

    @classmethod
    def from_profile(cls, prof: Any) -> FLCosts:
        """From :class:`raysfl.models.flops.ModelProfile`: ``full_*`` FLOPs, parameter + buffer bytes."""
        return cls(
            forward_flops=float(prof.full_forward_flops),
            backward_flops=float(prof.full_backward_flops),
            model_bytes=int(
                prof.client_model_bytes
                + prof.client_buffer_bytes
                + prof.server_model_bytes
                + prof.server_buffer_bytes
            ),
        )


@dataclass
class FLJob:
    """An open job: the global version its model was sent at and when it started.

    A *deferred* job (a policy with ``deferred = True``, PORT's urgent requests) is trained only when its
    model is due, so the policy can still cut it short: it keeps its learning-rate factor, the end time of
    each local step and the token of its pending ``model`` event.
    """

    version: int
    start: float
    steps: int | None = None  # local steps when a method sets them (FedProx's stragglers); None: E
    lr: float | None = None  # learning-rate factor sent with the training (deferred jobs)
    ends: tuple[float, ...] = ()  # virtual time at which each local step ends (deferred jobs)
    token: int = 0  # the job's pending model event carries this (deferred jobs)
    aliased: bool = False  # trains from the global model of its due time (``aliased_base``)


class FLPolicy:
    """Scheduling of full-model FL jobs; ``synchronous`` selects FedAvg rounds, else concurrency C.

    Args:
        setup: the run's setup.
        time: the :class:`raysfl.system.durations.TimeModel`.
        costs: FLOPs and bytes of the full model.
        rng: the policy's random stream (client sampling).
        per_update: arrivals per global update (FedAvg: C; FedAsync: 1; FedBuff/CA2FL: the buffer size).
        synchronous: start new jobs only when a global update completes, drawing C of all K clients.
        replacement: ``"others"`` excludes the clients that just finished from the draw of their
            replacements [C]; ``"any"`` lets them be drawn again [A]. Ignored when synchronous.
        discard_above: drop arrivals with staleness > this many versions (None: keep all).
        hold_above: defer a due global update while a running job has staleness > this (None: never).
        server_flush: the server aggregates only when called ``flush`` (sent with each global update).
        job_lr: ``(client, starts) -> factor`` for a new job's learning rate, ``starts[k]`` being the jobs
            each client has started so far, this one included (None: factor 1, no argument sent).
        aliased_base: jobs started after time 0 train from the global model of their due time, not of
            their start (the GAS code's CA2FL [C], module docstring).
        train_when_due: train every job when its model is due (as ``deferred``), so a pool runs the jobs
            in the order they finish, as the GAS code does (its FedBuff and CA2FL train a job at its finish
            time, GAS spec §10.2 [C]); the order matters where jobs share optimizer state.
    """

    deferred = False  # train each job when its model is due (a subclass sets it: PORT's urgent requests)

    # grid cell of the latest global iteration for train.eval_every_s (schedule.eval_slot); a class default,
    # so checkpoints taken before the option existed resume with it
    eval_cell = 0
    aliased_base = False  # a class default too, for checkpoints taken before the option existed

    def __init__(
        self,
        setup: RunSetup,
        time: Any,
        costs: FLCosts,
        rng: np.random.Generator,
        *,
        per_update: int,
        synchronous: bool = False,
        replacement: str = "others",
        discard_above: int | None = None,
        hold_above: int | None = None,
        server_flush: bool = False,
        job_lr: Callable[[int, list[int]], float] | None = None,
        aliased_base: bool = False,
        train_when_due: bool = False,
    ) -> None:
        if per_update < 1:
            raise ValueError(f"per_update must be >= 1, got {per_update}")
        if replacement not in ("others", "any"):
            raise ValueError(f"replacement must be 'others' or 'any', got {replacement!r}")
        self.setup = setup
        self.train = setup.scenario.train
        self.concurrency = setup.scenario.federation.active_clients
        self.time = time
        self.costs = costs
        self.rng = rng
        self.per_update = per_update
        self.synchronous = synchronous
        self.replacement = replacement
        k = setup.num_clients
        if self.concurrency > k:
            raise ValueError(f"active_clients C = {self.concurrency} exceeds num_clients K = {k}")
        self.active: dict[int, FLJob] = {}
        self.idle: set[int] = set(range(k))
        self.finished: list[int] = []  # arrived since the last refill
        self.refill_at: float | None = None
        self.steps = [0] * k  # minibatches drawn by each client so far (their sizes set compute times)
        self.version = 0
        self.in_buffer = 0
        self.discard_above = discard_above
        self.hold_above = hold_above
        self.server_flush = server_flush
        self.job_lr = job_lr
        self.aliased_base = aliased_base
        if train_when_due:
            self.deferred = True
        self.starts = [0] * k  # jobs started by each client so far
        self.discarded = 0
        self.accepted = 0  # arrivals not discarded (their count sets train.lr_decay's exponent, async)
        self.serial = 0  # tokens of deferred jobs' model events

    # --- durations ----------------------------------------------------------------------------------
    def step_times(self, k: int, steps: int | None = None) -> list[float]:
        """Compute time of each of client k's next ``steps`` (None: E) steps; advances its step count."""
        b, n = self.train.batch_size, self.setup.client_size(k)
        flops = self._step_flops(k)
        times = []
        for _ in range(self.train.local_iterations if steps is None else steps):
            times.append(self.time.compute_s(k, flops, batch_size_at(self.steps[k], n, b)))
            self.steps[k] += 1
        return times

    def _step_flops(self, k: int) -> float:
        """Per-sample FLOPs of one of client k's local steps: the full model's forward and backward.

        A subclass adds what its local objective computes besides (MOON's frozen forward passes).
        """
        return self.costs.forward_flops + self.costs.backward_flops

    def job_duration(self, k: int, steps: int | None = None) -> float:
        """T_k for client k's next job of ``steps`` (None: E) minibatch steps; advances its step counter."""
        return (
            self.time.download_s(k, self.costs.model_bytes)
            + sum(self.step_times(k, steps))
            + self.time.upload_s(k, self.costs.model_bytes)
        )

    # --- jobs --------------------------------------------------------------------------------------------
    def _job_steps(self, k: int) -> int | None:
        """Local steps of client k's job that starts now; None: E (a subclass may set fewer)."""
        return None

    def _job_lr(self, k: int) -> float | None:
        """Learning-rate factor of client k's job that starts now (``job_lr``; None: none sent)."""
        return None if self.job_lr is None else float(self.job_lr(k, self.starts))

    def _decayed(self, factor: float | None) -> float | None:
        """``factor`` × ``train.lr_decay``^j, j = rounds so far (synchronous) or ⌊accepted arrivals / C⌋.

        FedASMU's decay schedule (its policy's ``learning_rate``) for the whole FL family, so that methods
        compared with it can decay alike (the paper decays every method, FedASMU §6.1.4) [A]. With
        ``lr_decay = 1`` the factor is returned unchanged (``None``: no factor is sent, as before).
        """
        decay = self.train.lr_decay
        if decay == 1.0:
            return factor
        j = self.version if self.synchronous else self.accepted // self.concurrency
        return (1.0 if factor is None else factor) * decay**j

    @staticmethod
    def _train_args(base: Slot, lr: float | None, steps: int | None) -> tuple[Any, ...]:
        """The client's ``train`` arguments: the model, then the lr factor and the steps when set."""
        args: tuple[Any, ...] = (base,)
        if lr is not None or steps is not None:
            args = (base, 1.0 if lr is None else lr)
        if steps is not None:
            args = (*args, steps)
        return args

    def _start_job(self, k: int, t: float, initial: bool = False) -> list[Action]:
        self.idle.discard(k)
        steps = self._job_steps(k)
        job = FLJob(version=self.version, start=t, steps=steps, aliased=self.aliased_base and not initial)
        self.active[k] = job
        down = self.time.download_s(k, self.costs.model_bytes)
        times = self.step_times(k, steps)
        dur = down + sum(times) + self.time.upload_s(k, self.costs.model_bytes)
        self.starts[k] += 1
        base, out = Slot(("w0", k)), Slot(("model", k))
        lr = self._decayed(self._job_lr(k))
        log = start_log(t, k, self.costs.model_bytes, self.version)
        if job.aliased:  # the model is taken and trained when due (``_on_model``)
            job.lr = lr
            if not self.deferred:
                return [Schedule(t + dur, "model", k), log]
            job.token, self.serial = self.serial, self.serial + 1
            return [Schedule(t + dur, "model", k, {"job": job.token}), log]
        send = Call(SERVER, FLServer.send_model, (k,), out=base)
        if self.deferred:  # trained when due (``_on_model``), so an urgent request can still cut it short
            job.lr, job.ends, job.token = lr, tuple(accumulate(times, initial=t + down))[1:], self.serial
            self.serial += 1
            return [send, Schedule(t + dur, "model", k, {"job": job.token}), log]
        train = Call(
            CLIENT,
            FLClient.train,
            self._train_args(base, lr, steps),
            client=k,
            out=out,
            free=(base,),
            pace_s=dur,
        )
        return [send, train, Schedule(t + dur, "model", k, {"awaits": ("model", k)}), log]

    def _draw(self, n: int) -> list[int]:
        """Draw n clients uniformly without replacement; the finished ones re-join the idle set."""
        others = sorted(self.idle)
        if self.synchronous or self.replacement == "any" or len(others) < n:
            pool = sorted(self.idle | set(self.finished))
        else:
            pool = others
        chosen = self.rng.choice(pool, size=n, replace=False)
        self.idle |= set(self.finished)
        self.finished = []
        return sorted(int(c) for c in chosen)

    # --- the policy protocol -------------------------------------------------------------------------------
    def start(self) -> list[Action]:
        """Evaluate the initial model and start C jobs on clients drawn uniformly without replacement.

        The server hands out the C models before it evaluates, so the first jobs train while the evaluation
        runs instead of waiting for it (the server runs its calls in submission order). Nothing else moves:
        ``send_model`` changes neither the global model nor a counter, and the evaluation's report is
        submitted before the jobs' start logs, so its row is the one the order "evaluate, then send" gave.
        """
        jobs = [a for k in self._draw(self.concurrency) for a in self._start_job(k, 0.0, initial=True)]
        sends = [a for a in jobs if isinstance(a, Call) and a.target == SERVER]
        rest = [a for a in jobs if not (isinstance(a, Call) and a.target == SERVER)]
        return [*sends, *evaluate(self.version, 0.0), *rest]

    def on_event(self, ev: Event) -> list[Action]:
        """Dispatch a ``model`` arrival or a ``refill``."""
        if ev.kind == "model":
            return self._on_model(ev)
        if ev.kind == "refill":
            return self._on_refill(ev)
        raise RuntimeError(f"FL policy got an unknown event kind {ev.kind!r}")

    def _on_model(self, ev: Event) -> list[Action]:
        k, t = ev.client, ev.t
        if self.deferred and (k not in self.active or self.active[k].token != ev.data.get("job")):
            return []  # the model event of a job that already reported early
        job = self.active.pop(k)
        staleness = 0 if job.aliased else self.version - job.version
        dropped = self.discard_above is not None and staleness > self.discard_above
        if dropped:
            self.discarded += 1
        else:
            self.in_buffer += 1
            self.accepted += 1
        due = self.in_buffer >= self.per_update
        update = due and not self._held()
        row: dict[str, Any] = {
            "t": t,
            "kind": "model",
            "client": k,
            "e": self.train.local_iterations if job.steps is None else job.steps,
            "bytes_up": self.costs.model_bytes,
            "staleness": staleness,
            "version": self.version,
        }
        if dropped:
            row["discarded"] = 1
        if update:
            row["server_update"] = 1
        actions: list[Action] = [
            Call(
                SERVER,
                FLServer.on_client_model,
                (k, Slot(("model", k)), self.setup.client_size(k)),
                free=(Slot(("model", k)),),
            ),
            Log(row),
        ]
        if self.deferred or job.aliased:
            model, base = Slot(("model", k)), Slot(("w0", k))
            args = self._train_args(base, job.lr, job.steps)
            actions.insert(0, Call(CLIENT, FLClient.train, args, client=k, out=model, free=(base,)))
            if job.aliased:
                actions.insert(0, Call(SERVER, FLServer.send_model, (k,), out=base))
        if update and self.server_flush:
            actions.insert(len(actions) - 1, Call(SERVER, FlushingServer.flush))
        if due and not update:
            actions += self._on_hold(t)
        self.finished.append(k)
        if update:
            self.in_buffer = 0
            self.version += 1
            more, stop = after_update(self.version, t, self.train, last_slot=self.eval_cell)
            self.eval_cell = eval_slot(t, self.train)
            actions += more
            if stop:
                return actions
        if (update or not self.synchronous) and self.refill_at != t:
            self.refill_at = t
            actions.append(Schedule(t, "refill"))
        return actions

    def _on_hold(self, t: float) -> list[Action]:
        """Actions when a due global update is held back by the staleness bound (PORT: urgent requests)."""
        return []

    def _held(self) -> bool:
        """PORT's bound: a running job more than ``hold_above`` versions old holds the next update back.

        Plato's server skips an aggregation while ``current_round − starting_round > staleness_bound`` for a
        training client [C]: a job at the bound does not hold, so an update may arrive b + 1 versions stale.
        """
        return any(self._past_bound(j) for j in self.active.values())

    def _past_bound(self, job: FLJob) -> bool:
        """Whether ``job`` runs on a model more than ``hold_above`` versions old (never without a bound)."""
        return self.hold_above is not None and self.version - job.version > self.hold_above

    def _on_refill(self, ev: Event) -> list[Action]:
        self.refill_at = None
        n = self.concurrency if self.synchronous else len(self.finished)
        actions: list[Action] = []
        for k in self._draw(n):
            actions += self._start_job(k, ev.t)
        return actions

    # --- checkpoints ------------------------------------------------------------------------------------
    def global_iteration(self) -> int:
        """Global iterations completed so far (checkpoints are taken every N of them)."""
        return self.version
