"""A split method written outside raysfl: asynchronous split FL with staleness-weighted server steps.

The second worked example of ``docs/writing-a-method.md`` (the first, ``examples/fedasync_hinge``, is a
full-model FL method). It uses nothing but :mod:`raysfl.api` and shows what a split method adds: a job that
spans several calls of one client, activations and gradients passed between a client and the server through
slots, and a server whose work queues.

The method (an illustration, not a paper's). C of the K clients train at once. A job of client k:

1. download the client part w_c, whose version v_k is the number of client parts mixed in so far;
2. E times: forward one minibatch to the cut, upload the activations (and labels); the server runs its part,
   steps it with learning rate η·s(τ), and returns the gradient at the cut; the client back-propagates it
   and steps its copy of the client part;
3. upload the trained client part; the server mixes it in, w_c ← (1 − β) w_c + β w_k with β = mix·s(τ).

τ is the job's staleness: the client parts mixed in since the job downloaded w_c. s(τ) = (1 + τ)^(−e)
(``weighting = "poly"``, e = ``exponent``) or 1 (``"constant"``). A global iteration is one client part
mixed in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call

from raysfl.api import (
    CLIENT,
    SERVER,
    Action,
    AlgorithmSpec,
    Call,
    Event,
    Log,
    LogRow,
    ModelProfile,
    Report,
    RunSetup,
    Schedule,
    ServerLogic,
    Slot,
    SplitModel,
    Stop,
    TimeModel,
    batch_size_at,
    draws_randomness,
    evaluate_model,
    load_into,
    make_optimizer,
    option,
    replaying_rng,
    seeded_if,
)

Weights = dict[str, torch.Tensor]
Batch = tuple[torch.Tensor, torch.Tensor]


# --- 1. the options: [algorithm.params] ---------------------------------------------------------------------
@dataclass(frozen=True)
class StalenessParams:
    """Options of the staleness-weighted asynchronous SFL example."""

    weighting: str = option("poly", choices=("poly", "constant"), doc="s(τ): (1+τ)^-exponent, or 1")
    exponent: float = option(1.0, ge=0.0, le=4.0, doc="e of s(τ) = (1+τ)^-e with weighting = 'poly'")
    mix: float = option(0.5, gt=0.0, le=1.0, doc="β = mix·s(τ): weight of an arriving client part")


def staleness_weight(tau: int, p: StalenessParams) -> float:
    """s(τ) = (1 + τ)^(−e) for ``"poly"``, 1 for ``"constant"``."""
    return 1.0 if p.weighting == "constant" else (1.0 + tau) ** -p.exponent


# --- 2. the client: runs in the client pools ----------------------------------------------------------------
@dataclass
class SplitClientState:
    """One client: its data order and random streams; during a job its client part and pending batch."""

    indices: np.ndarray
    order: np.ndarray
    pos: int
    rng: np.random.Generator
    gen: torch.Generator
    params: Weights | None = None  # the job's client part: trainable leaves ...
    buffers: Weights | None = None  # ... and buffers (BatchNorm statistics)
    optimizer: torch.optim.Optimizer | None = None
    pending_x: torch.Tensor | None = field(default=None, repr=False)  # the batch whose gradient is awaited
    pending_rng: torch.Tensor | None = field(default=None, repr=False)  # torch's RNG state before its forward


class SplitClient:
    """The client part of the model, shared by every client of a pool; per-client data lives in the state.

    A job is E + 1 calls of its client (``begin``, ``step`` E − 1 times, ``finish``), and other clients'
    calls run in between, so the job's weights stay in the client's state and run through the pool's one
    module with ``functional_call``. Between a forward and its backward the client keeps its input batch and
    RNG state, not the autograd graph (graphs cannot be checkpointed): the backward runs the forward again
    under ``replaying_rng``, which gives the activations that were sent, dropout masks included.
    """

    def __init__(
        self, setup: RunSetup, model: SplitModel, train_x: np.ndarray, train_y: np.ndarray, transform: Any
    ) -> None:
        self.cfg = setup.scenario.train
        self.net = model.client
        self.random = draws_randomness(self.net)
        self.param_names = [name for name, _ in self.net.named_parameters()]
        self.train_x, self.train_y, self.transform = train_x, train_y, transform

    def init_state(
        self, client: int, indices: np.ndarray, seed_seq: np.random.SeedSequence
    ) -> SplitClientState:
        """Every random number of client ``client`` comes from ``seed_seq``: the same in any pool."""
        rng = np.random.default_rng(seed_seq)
        gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
        return SplitClientState(np.asarray(indices), rng.permutation(len(indices)), 0, rng, gen)

    def begin(self, st: SplitClientState, weights: Mapping[str, torch.Tensor]) -> Batch:
        """Take the downloaded client part, with a fresh optimizer of ``[train]``, and forward a batch."""
        st.params = {n: weights[n].detach().clone().requires_grad_(True) for n in self.param_names}
        st.buffers = {n: w.detach().clone() for n, w in weights.items() if n not in st.params}
        st.optimizer = make_optimizer(list(st.params.values()), self.cfg)
        return self._forward(st)

    def step(self, st: SplitClientState, grad: torch.Tensor) -> Batch:
        """Apply the server's gradient at the cut, then forward the next batch."""
        self._backward(st, grad)
        return self._forward(st)

    def finish(self, st: SplitClientState, grad: torch.Tensor) -> Weights:
        """Apply the last gradient and return the trained client part; the client is idle again."""
        self._backward(st, grad)
        assert st.params is not None and st.buffers is not None
        out = {**{n: p.detach().clone() for n, p in st.params.items()}, **st.buffers}
        st.params = st.buffers = st.optimizer = None
        return out

    def _batch(self, st: SplitClientState) -> Batch:
        if st.pos >= len(st.order):  # a new epoch: a new permutation
            st.order, st.pos = st.rng.permutation(len(st.indices)), 0
        pick = st.indices[st.order[st.pos : st.pos + self.cfg.batch_size]]
        st.pos += self.cfg.batch_size
        x = self.transform.train(torch.from_numpy(np.ascontiguousarray(self.train_x[pick])), st.gen)
        return x, torch.from_numpy(np.asarray(self.train_y[pick], dtype=np.int64))

    def _forward(self, st: SplitClientState) -> Batch:
        assert st.params is not None and st.buffers is not None
        self.net.train()
        with seeded_if(self.random, st.gen):
            x, y = self._batch(st)
            st.pending_x, st.pending_rng = x, torch.get_rng_state()
            # the statistics are updated by the backward's pass, so this one runs on copies
            scratch = {n: b.clone() for n, b in st.buffers.items()}
            with torch.no_grad():
                acts = functional_call(self.net, (st.params, scratch), (x,))
        return acts, y

    def _backward(self, st: SplitClientState, grad: torch.Tensor) -> None:
        assert st.params is not None and st.buffers is not None and st.optimizer is not None
        assert st.pending_x is not None and st.pending_rng is not None, "a gradient without its forward"
        self.net.train()
        with replaying_rng(st.pending_rng):
            acts = functional_call(self.net, (st.params, st.buffers), (st.pending_x,))
        acts.backward(grad)
        st.optimizer.step()
        st.optimizer.zero_grad(set_to_none=True)
        st.pending_x = st.pending_rng = None


# --- 3. the server: runs in the server actor ----------------------------------------------------------------
class SplitServer:
    """The global client part w_c (and its version), the server part, and each open job's base version."""

    def __init__(
        self,
        setup: RunSetup,
        model: SplitModel,
        test_x: torch.Tensor,
        test_y: torch.Tensor,
        seed: int,
        device: str,
    ) -> None:
        self.p: StalenessParams = setup.params
        self.cfg = setup.scenario.train
        self.device = torch.device(device)
        self.full = model.full().to(self.device)  # client and server parts, for evaluation
        self.client_part, self.server_part = model.client, model.server  # the same modules as in full
        self.global_client: Weights = {
            n: w.detach().cpu().clone() for n, w in self.client_part.state_dict().items()
        }
        self.optimizer = make_optimizer(self.server_part.parameters(), self.cfg)
        self.test_x, self.test_y = test_x, test_y
        self.version = 0
        self.bases: dict[int, int] = {}
        self.step_weights: list[float] = []  # s(τ) of the server steps since the last evaluation

    def send_model(self, client: int) -> Weights:
        """The client part for a new job; the job's staleness counts from this version."""
        self.bases[client] = self.version
        return self.global_client

    def train_step(self, client: int, batch: Batch) -> torch.Tensor:
        """One server step on a client's activations at learning rate η·s(τ); the gradient at the cut.

        With ``train.momentum`` the step is the momentum buffer's, so s(τ) scales the whole step (the
        buffer's earlier, fresher gradients included), not only the stale gradient's share of it.
        """
        acts, y = (t.to(self.device) for t in batch)
        acts.requires_grad_(True)
        weight = staleness_weight(self.version - self.bases[client], self.p)
        self.server_part.train()
        loss = F.cross_entropy(self.server_part(acts), y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        for group in self.optimizer.param_groups:
            group["lr"] = self.cfg.lr * weight
        self.optimizer.step()
        self.step_weights.append(weight)
        assert acts.grad is not None
        return acts.grad.cpu()

    def receive(self, client: int, trained: Mapping[str, torch.Tensor]) -> None:
        """w_c ← (1 − β) w_c + β w_k, β = mix·s(τ); the version advances."""
        beta = self.p.mix * staleness_weight(self.version - self.bases.pop(client), self.p)
        self.global_client = {
            n: torch.lerp(w, trained[n], beta) if w.is_floating_point() else trained[n].clone()
            for n, w in self.global_client.items()
        }
        self.version += 1

    def evaluate(self) -> dict[str, Any]:
        """Test accuracy and loss of w_c with the server part, and the mean s(τ) of the server's steps."""
        load_into(self.client_part, self.global_client)
        acc, loss = evaluate_model(self.full, self.test_x, self.test_y, self.cfg.eval_batch_size, self.device)
        weights, self.step_weights = self.step_weights, []
        return {
            "accuracy": acc,
            "loss": loss,
            "mean_step_weight": sum(weights) / len(weights) if weights else None,
        }


# --- 4. the policy: runs in the coordinator, sees times and sizes only ------------------------------------
class SplitPolicy:
    """C concurrent jobs; the server runs one step at a time, so arrivals queue for it."""

    def __init__(
        self, setup: RunSetup, time: TimeModel, profile: ModelProfile, rng: np.random.Generator
    ) -> None:
        self.setup, self.cfg, self.time, self.profile, self.rng = (
            setup,
            setup.scenario.train,
            time,
            profile,
            rng,
        )
        self.model_bytes = profile.client_model_bytes + profile.client_buffer_bytes
        self.steps_done = [0] * setup.num_clients  # minibatches each client has taken, over all its jobs
        self.idle = list(range(setup.num_clients))
        self.base: dict[int, int] = {}  # the version each running job started from
        self.steps_left: dict[int, int] = {}
        self.server_free_at = 0.0
        self.version = 0

    def global_iteration(self) -> int:
        """Client parts mixed in so far."""
        return self.version

    def start(self) -> list[Action]:
        """Evaluate the initial model and start C jobs."""
        actions = self._evaluate(0.0)
        for _ in range(self.setup.scenario.federation.active_clients):
            actions += self._start_job(0.0)
        return actions

    def on_event(self, ev: Event) -> list[Action]:
        """React to an arrival.

        ``acts``: a batch's activations reach the server; ``grad``: its gradient reaches the client;
        ``model``: a finished job's client part reaches the server.
        """
        if ev.kind == "acts":
            return self._server_step(ev.client, ev.t)
        if ev.kind == "grad":
            return self._client_step(ev.client, ev.t)
        return self._mix_in(ev.client, ev.t)

    def _evaluate(self, t: float) -> list[Action]:
        slot = Slot(("eval", self.version))
        return [
            Call(SERVER, ServerLogic.evaluate, out=slot),
            Report(slot, {"iteration": self.version, "t": t}),
        ]

    def _start_job(self, t: float) -> list[Action]:
        k = self.idle.pop(int(self.rng.integers(len(self.idle))))
        self.base[k], self.steps_left[k] = self.version, self.cfg.local_iterations
        weights, acts = Slot(("weights", k)), Slot(("acts", k))
        arrive = t + self.time.download_s(k, self.model_bytes) + self._forward_and_upload_s(k)
        return [
            Call(SERVER, SplitServer.send_model, (k,), out=weights),
            Call(CLIENT, SplitClient.begin, (weights,), client=k, out=acts, free=(weights,)),
            Log(LogRow(t=t, kind="start", client=k, bytes_down=self.model_bytes, version=self.version)),
            Schedule(arrive, "acts", k, {"awaits": acts.name}),
        ]

    def _batch(self, k: int) -> int:
        """The size of client k's current minibatch: B, or less for the last of an epoch."""
        return batch_size_at(self.steps_done[k], self.setup.client_size(k), self.cfg.batch_size)

    def _acts_bytes(self, batch: int) -> int:
        """An upload: the batch's activations and its int64 labels."""
        return (self.profile.activation_bytes + 8) * batch

    def _forward_and_upload_s(self, k: int) -> float:
        batch = self._batch(k)
        forward = self.time.compute_s(k, self.profile.client_forward_flops, batch)
        return forward + self.time.upload_s(k, self._acts_bytes(batch))

    def _server_step(self, k: int, t: float) -> list[Action]:
        """The server takes the activations when it is free, steps, and sends the gradient back."""
        acts, grad, batch = Slot(("acts", k)), Slot(("grad", k)), self._batch(k)
        flops = self.profile.server_forward_flops + self.profile.server_backward_flops
        self.server_free_at = max(t, self.server_free_at) + self.time.server_s(flops, batch)
        back = self.server_free_at + self.time.download_s(k, self.profile.activation_bytes * batch)
        staleness = self.version - self.base[k]
        row = LogRow(t=t, kind="acts", client=k, bytes_up=self._acts_bytes(batch), staleness=staleness)
        return [
            Call(SERVER, SplitServer.train_step, (k, acts), out=grad, free=(acts,)),
            Log(row),
            Schedule(back, "grad", k, {"awaits": grad.name}),
        ]

    def _client_step(self, k: int, t: float) -> list[Action]:
        """Back-propagate the gradient; then forward the next batch, or upload the client part."""
        grad, batch = Slot(("grad", k)), self._batch(k)
        backward = self.time.compute_s(k, self.profile.client_backward_flops, batch)
        log = Log(LogRow(t=t, kind="grad", client=k, bytes_down=self.profile.activation_bytes * batch))
        self.steps_done[k] += 1  # this minibatch is done: the next forward takes the client's next one
        self.steps_left[k] -= 1
        if self.steps_left[k] > 0:
            acts = Slot(("acts", k))
            arrive = t + backward + self._forward_and_upload_s(k)
            return [
                Call(CLIENT, SplitClient.step, (grad,), client=k, out=acts, free=(grad,)),
                log,
                Schedule(arrive, "acts", k, {"awaits": acts.name}),
            ]
        trained = Slot(("trained", k))
        arrive = t + backward + self.time.upload_s(k, self.model_bytes)
        return [
            Call(CLIENT, SplitClient.finish, (grad,), client=k, out=trained, free=(grad,)),
            log,
            Schedule(arrive, "model", k, {"awaits": trained.name}),
        ]

    def _mix_in(self, k: int, t: float) -> list[Action]:
        """Mix the client part in; evaluate on schedule; stop at the budget, else start the next job."""
        trained = Slot(("trained", k))
        staleness = self.version - self.base.pop(k)
        row = LogRow(
            t=t, kind="model", client=k, bytes_up=self.model_bytes, staleness=staleness, version=self.version
        )
        actions: list[Action] = [Call(SERVER, SplitServer.receive, (k, trained), free=(trained,)), Log(row)]
        self.version += 1
        done = self.version >= self.cfg.global_iterations
        if done or self.version % self.cfg.eval_every == 0:
            actions += self._evaluate(t)
        if done:
            return [*actions, Stop("budget reached")]
        self.idle.append(k)  # the finished client may be drawn again
        return actions + self._start_job(t)


# --- 5. the spec: what a scenario's algorithm.name points at ---------------------------------------------
SPEC = AlgorithmSpec(
    name="sfl_staleness",
    params=StalenessParams,
    description="async SFL example: server steps at η·s(τ), client parts mixed in with mix·s(τ)",
    family="split",
    source="raysfl example (docs/writing-a-method.md), not a paper",
    make_client=SplitClient,
    make_server=SplitServer,
    make_policy=SplitPolicy,
    state_classes=(SplitClient, SplitClientState, SplitServer, SplitPolicy),
)
