"""FedAsync with a hinge staleness function, written outside raysfl against :mod:`raysfl.api` only.

Xie, Koyejo & Gupta (2019), "Asynchronous Federated Optimization", Algorithm 1 with the hinge function of
§5.2: C clients train at all times; whenever one finishes, its model x_new is mixed into the global one,

    x_t = (1 − α_t)·x_{t−1} + α_t·x_new,   α_t = α·s(t − τ),   s(τ) = 1 if τ ≤ b else 1 / (a·(τ − b) + 1),

where τ is the job's base version (t − τ its staleness), and a replacement client starts at once.

Run it with ``algorithm.name = "examples.fedasync_hinge.method:SPEC"`` (see ``scenario.toml`` beside this
file); ``docs/writing-a-method.md`` builds this module step by step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

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
    evaluate_model,
    load_into,
    make_optimizer,
    option,
)

Weights = dict[str, torch.Tensor]


# --- 1. options --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HingeParams:
    """``[algorithm.params]`` of this method; raysfl validates them (unknown keys, ranges) at load time."""

    alpha: float = option(0.6, gt=0, le=1, doc="mixing weight α ∈ (0, 1] (Xie et al. 2019, Alg. 1)")
    a: float = option(0.5, ge=0, doc="slope a of the hinge s(τ) = 1 / (a(τ − b) + 1) past b")
    b: int = option(2, ge=0, doc="updates at most b versions stale are mixed in with the full α")


def hinge(staleness: int, a: float, b: int) -> float:
    """s(τ) of Xie et al. (2019) §5.2: 1 up to ``b`` versions, then 1 / (a·(τ − b) + 1)."""
    return 1.0 if staleness <= b else 1.0 / (a * (staleness - b) + 1.0)


# --- 2. the client: runs in a pool -------------------------------------------------------------------------
@dataclass
class HingeClientState:
    """What one virtual client keeps between its jobs: its samples, its place in them, its random streams."""

    indices: np.ndarray
    order: np.ndarray  # this epoch's permutation of positions into ``indices``
    pos: int  # next position in ``order``
    rng: np.random.Generator  # batch order
    gen: torch.Generator  # data augmentation


class HingeClient:
    """Local training with [train]'s optimizer, full model; one object serves every client of its pool."""

    def __init__(
        self, setup: RunSetup, model: SplitModel, train_x: np.ndarray, train_y: np.ndarray, transform: Any
    ) -> None:
        self.cfg = setup.scenario.train
        self.model = model.full()  # the pool's working copy; loaded with a job's weights when it runs
        self.train_x, self.train_y, self.transform = train_x, train_y, transform

    def init_state(
        self, client: int, indices: np.ndarray, seed_seq: np.random.SeedSequence
    ) -> HingeClientState:
        """A client's state on its first job; every draw of the client comes from ``seed_seq``."""
        rng = np.random.default_rng(seed_seq)
        gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
        return HingeClientState(np.asarray(indices), rng.permutation(len(indices)), 0, rng, gen)

    def _batch(self, st: HingeClientState) -> tuple[torch.Tensor, torch.Tensor]:
        if st.pos >= len(st.order):  # a new epoch: a new permutation
            st.order, st.pos = st.rng.permutation(len(st.indices)), 0
        pick = st.indices[st.order[st.pos : st.pos + self.cfg.batch_size]]
        st.pos += self.cfg.batch_size
        x = self.transform.train(torch.from_numpy(np.ascontiguousarray(self.train_x[pick])), st.gen)
        return x, torch.from_numpy(np.asarray(self.train_y[pick], dtype=np.int64))

    def train(self, st: HingeClientState, weights: Mapping[str, torch.Tensor]) -> Weights:
        """E local steps from ``weights`` (the global model the job received); the trained model."""
        self.model.load_state_dict(dict(weights))
        self.model.train()
        opt = make_optimizer(self.model.parameters(), self.cfg)  # [train]: optimizer, lr, momentum, decay
        for _ in range(self.cfg.local_iterations):
            x, y = self._batch(st)
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(self.model(x), y).backward()
            opt.step()
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}


# --- 3. the server: runs in the server actor ---------------------------------------------------------------
class HingeServer:
    """The global model, its version, each open job's base version; mixes arrivals in (Alg. 1)."""

    def __init__(
        self,
        setup: RunSetup,
        model: SplitModel,
        test_x: torch.Tensor,
        test_y: torch.Tensor,
        seed: int,
        device: str,
    ) -> None:
        self.p: HingeParams = setup.params
        self.cfg = setup.scenario.train
        self.device = torch.device(device)
        self.model = model.full().to(self.device)
        self.weights: Weights = {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}
        self.test_x, self.test_y = test_x, test_y
        self.version = 0
        self.bases: dict[int, int] = {}  # client → the version its open job started from
        self.alpha_sum = 0.0

    def send_model(self, client: int) -> Weights:
        """The global model for ``client``'s new job (a new dict every update, so never changed later)."""
        self.bases[client] = self.version
        return self.weights

    def receive(self, client: int, trained: Mapping[str, torch.Tensor]) -> None:
        """Mix ``client``'s trained model in with α·s(staleness); one global update."""
        alpha = self.p.alpha * hinge(self.version - self.bases.pop(client), self.p.a, self.p.b)
        self.alpha_sum += alpha
        self.weights = {
            k: ((1 - alpha) * v.double() + alpha * trained[k].double()).to(v.dtype)
            if v.is_floating_point()
            else trained[k].clone()
            for k, v in self.weights.items()
        }
        self.version += 1

    def evaluate(self) -> dict[str, float]:
        """Accuracy and mean loss of the global model on the test set, and the mean α so far."""
        load_into(self.model, self.weights)  # in place, no wait per tensor on a GPU
        accuracy, loss = evaluate_model(
            self.model, self.test_x, self.test_y, self.cfg.eval_batch_size, self.device
        )
        return {"accuracy": accuracy, "loss": loss, "mean_alpha": self.alpha_sum / max(self.version, 1)}


# --- 4. the policy: runs in the coordinator ----------------------------------------------------------------
class HingePolicy:
    """C concurrent jobs; an arrival is one global iteration and frees its client for a replacement."""

    def __init__(
        self, setup: RunSetup, time: TimeModel, profile: ModelProfile, rng: np.random.Generator
    ) -> None:
        self.setup, self.cfg, self.time, self.rng = setup, setup.scenario.train, time, rng
        self.flops = float(profile.full_forward_flops + profile.full_backward_flops)  # per sample
        self.model_bytes = int(
            profile.client_model_bytes
            + profile.client_buffer_bytes
            + profile.server_model_bytes
            + profile.server_buffer_bytes
        )
        self.idle = set(range(setup.num_clients))
        self.base: dict[int, int] = {}  # client → version its job started from
        self.version = 0

    def _evaluate(self, t: float) -> list[Action]:
        slot = Slot(("eval", self.version))
        return [
            Call(SERVER, ServerLogic.evaluate, out=slot),
            Report(slot, {"iteration": self.version, "t": t}),
        ]

    def _start(self, t: float) -> list[Action]:
        """Draw an idle client uniformly and start its job: download, E steps, upload."""
        k = int(self.rng.choice(sorted(self.idle)))
        self.idle.discard(k)
        self.base[k] = self.version
        duration = (
            self.time.download_s(k, self.model_bytes)
            + self.cfg.local_iterations * self.time.compute_s(k, self.flops, self.cfg.batch_size)
            + self.time.upload_s(k, self.model_bytes)
        )
        w0, trained = Slot(("w0", k)), Slot(("trained", k))
        return [
            Call(SERVER, HingeServer.send_model, (k,), out=w0),
            Call(CLIENT, HingeClient.train, (w0,), client=k, out=trained, free=(w0,), pace_s=duration),
            Schedule(t + duration, "arrival", k, {"awaits": trained.name}),
            Log(LogRow(t=t, kind="start", client=k, bytes_down=self.model_bytes, version=self.version)),
        ]

    def start(self) -> list[Action]:
        """Evaluate the initial model, start C jobs."""
        actions = self._evaluate(0.0)
        for _ in range(self.setup.scenario.federation.active_clients):
            actions += self._start(0.0)
        return actions

    def on_event(self, ev: Event) -> list[Action]:
        """An arrival: mix it in (server), log it, evaluate when due, stop at the budget, else replace it."""
        k, t = ev.client, ev.t
        trained = Slot(("trained", k))
        staleness = self.version - self.base.pop(k)
        row = LogRow(t=t, kind="arrival", client=k, bytes_up=self.model_bytes, staleness=staleness)
        row["version"] = self.version
        actions: list[Action] = [Call(SERVER, HingeServer.receive, (k, trained), free=(trained,)), Log(row)]
        self.version += 1
        done = self.version >= self.cfg.global_iterations or 0 < self.cfg.max_emulated_s <= t
        if done or self.version % self.cfg.eval_every == 0:
            actions += self._evaluate(t)
        if done:
            return [*actions, Stop("budget reached")]
        if self.idle:  # the replacement is drawn from the other idle clients, then k re-joins them
            actions += self._start(t)
            self.idle.add(k)
        else:  # every other client is training: k starts the next job itself
            self.idle.add(k)
            actions += self._start(t)
        return actions

    def global_iteration(self) -> int:
        """Arrivals mixed in so far."""
        return self.version


# --- 5. the spec -------------------------------------------------------------------------------------------
SPEC = AlgorithmSpec(
    name="fedasync_hinge",
    params=HingeParams,
    description="async FL: each arrival mixed in with α·hinge(staleness) (example method outside raysfl)",
    family="fl",
    source="Xie, Koyejo & Gupta 2019, Asynchronous Federated Optimization, Alg. 1, §5.2",
    make_client=HingeClient,
    make_server=HingeServer,
    make_policy=HingePolicy,
    state_classes=(HingeClient, HingeClientState, HingeServer, HingePolicy),
)
