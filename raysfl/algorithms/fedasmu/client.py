"""FedASMU / FedSSMU device (Algorithm 2): local epochs with one timely fresh-model merge, in segments.

The engine runs one local training as several calls so that a mid-training request sees exactly the
global model current at its emulated time (the policy takes that snapshot when the request's event
fires):
    ``begin(state, base, job) -> l*``                      receive w_o (and a meta-model slot proposal),
                                                           choose l* (RL mode: the policy fetches it)
    ``start(state, base, job, last) -> upload | None``     ``begin`` with a slot the policy knows (fixed
                                                           or none), then train epochs 1..last
    ``epochs(state, first, last, offer) -> upload | None`` ``offer`` is the global model at the request
                                                           time of slot ``first`` (None if not newer than
                                                           w_o); train epochs first..last
The call that trains epoch 𝓛 returns the upload ``{"weights": w^i, "meta": {...}}``.

At its slot l* the device takes the offer (one fresh model per training, spec A11). ``blocking``: merge at
once (the policy has delayed the rest of the training by the download). ``overlap``: the model arrives
δ_req + t_down later; merge at the first epoch boundary at or after the arrival; a request whose model
would arrive after the start of the last epoch is not sent [A]. The merge (Eqs. 9-11) uses the next
minibatch ζ: loss_b at the local model,
w ← (1 − β)w + βw_g, loss_a and g_m at the merged model, γ and υ step on Eq. (11), and g_m is the first
SGD step (Eq. 6) of the epoch. 𝓡 = loss_b − loss_a rewards the slot choice (Q-learning, Eq. 8).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from raysfl import profiling
from raysfl.algorithms.common.fl_client import FLClient, FLClientState, Weights
from raysfl.algorithms.common.fl_server import mix_models
from raysfl.algorithms.common.optim import clip
from raysfl.algorithms.common.own_rng import seeded_if
from raysfl.algorithms.fedasmu.control import clamp, device_phi, merge_gradients, squash
from raysfl.algorithms.fedasmu.slots import ACTIONS, choose_action, next_slot, q_update


@dataclass
class MUClientState(FLClientState):
    """A device's persistent state: (γ, υ), its Q-table and slot history, plus the open training."""

    rl_rng: np.random.Generator | None = None
    gamma: float = 1.0
    upsilon: float = 0.5
    q: np.ndarray | None = None
    slot: int | None = None  # l* of the last training
    action: int | None = None  # action that produced it (None for the meta-model's first slot)
    weights: Weights | None = None  # local model while a training is open
    job: dict[str, Any] = field(default_factory=dict)
    pending: tuple[float, Mapping[str, Any]] | None = None  # (arrival time, offer) in overlap mode
    meta: dict[str, Any] = field(default_factory=dict)


class MUClient(FLClient):
    """Segmented local training with the device-side merge; persistent RL and merge controls per device.

    A job is several calls (``begin``/``start``, ``epochs``) with a model in the state between them, so
    its clients stay in their pools (``clients_roam = False``).
    """

    clients_roam = False

    def __init__(self, *args: Any, params: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.p = params

    def init_state(self, client: int, indices: np.ndarray, seed_seq: np.random.SeedSequence) -> MUClientState:
        """The FL client's cursor and streams, plus a separate ε-greedy stream (batch order unchanged)."""
        base = super().init_state(client, indices, seed_seq)
        rl_rng = np.random.Generator(np.random.PCG64(seed_seq.spawn(1)[0]))
        q = np.zeros((self.p.local_epochs + 1, len(ACTIONS)))
        return MUClientState(**vars(base), rl_rng=rl_rng, gamma=self.p.gamma0, upsilon=self.p.upsilon0, q=q)

    # --- engine-facing ---------------------------------------------------------------------------
    def begin(self, state: MUClientState, base: Mapping[str, Any], job: Mapping[str, Any]) -> int | None:
        """Open a training from ``base`` (w_o, o, proposal) and choose l*; returns l* (None: no request).

        With ``request_slot = "rl"`` the policy fetches this small value to time the request (and, for a
        blocking download, the rest of the training); nothing is trained yet.
        """
        state.weights = {k: v.detach().clone() for k, v in base["weights"].items()}
        state.job = dict(job)
        state.job["version"] = int(base["version"])
        state.pending = None
        state.meta = {"lr": job["lr"], "steps": 0, "fresh_version": None, "reward": None}
        state.meta["slot"] = self._choose_slot(state, base.get("proposal"))
        return state.meta["slot"]

    def start(
        self, state: MUClientState, base: Mapping[str, Any], job: Mapping[str, Any], last: int
    ) -> dict[str, Any] | None:
        """:meth:`begin` (the policy knows l*: a fixed slot or none), then train epochs 1..``last``."""
        self.begin(state, base, job)
        return self._train(state, 1, last)

    def epochs(
        self, state: MUClientState, first: int, last: int, offer: Mapping[str, Any] | None
    ) -> dict[str, Any] | None:
        """Continue the open training with epochs first..last; at l* = ``first`` take ``offer``."""
        self._open_weights(state)
        if offer is not None and first == state.meta["slot"] and state.meta["fresh_version"] is None:
            self._take_offer(state, first, offer)
        return self._train(state, first, last)

    @staticmethod
    def _open_weights(state: MUClientState) -> Weights:
        """The local model of the open training (set by :meth:`begin`, cleared by the last epoch)."""
        if state.weights is None:
            raise RuntimeError(f"invariant broken: client {state.client} has no open training")
        return state.weights

    # --- slot choice (Eq. 8) ---------------------------------------------------------------------
    def _choose_slot(self, state: MUClientState, proposal: int | None) -> int | None:
        p = self.p
        if p.request_slot == "none":
            return None
        if p.request_slot != "rl":
            return p.slot_for(p.request_slot)
        if state.slot is None:  # first training: the server's meta-model slot
            state.action = None
            state.slot = int(proposal) if proposal is not None else p.first_slot
            return state.slot
        assert state.q is not None and state.rl_rng is not None  # set by init_state
        a = choose_action(state.q[state.slot], p.epsilon, state.rl_rng)
        state.action = a
        state.meta["prev_slot"] = state.slot
        state.slot = next_slot(state.slot, a, p.first_slot, p.local_epochs)
        return state.slot

    def _learn_slot(self, state: MUClientState, reward: float) -> None:
        """Eq. (8) for the action taken at the start of this training (none for the first training)."""
        if self.p.request_slot != "rl" or state.action is None:
            return
        prev = state.meta["prev_slot"]
        assert state.q is not None and state.slot is not None  # set by init_state and _choose_slot
        q_update(state.q, prev, state.action, reward, state.slot, self.p.q_lr, self.p.q_discount)

    # --- fresh model -----------------------------------------------------------------------------
    def _take_offer(self, state: MUClientState, slot: int, offer: Mapping[str, Any]) -> None:
        job = state.job
        if job["mode"] == "blocking":
            state.pending = (-math.inf, offer)
            return
        arrival = job["boundaries"][slot - 1] + job["fresh_delay"]
        if arrival <= job["boundaries"][self.p.local_epochs - 1]:  # an epoch boundary is left to merge at
            state.pending = (arrival, offer)

    def _merge(self, state: MUClientState, x: torch.Tensor, y: torch.Tensor) -> None:
        """Eqs. (9)-(11) on minibatch ζ = (x, y); leaves g_m in the parameters' ``.grad``."""
        p, job, local = self.p, state.job, self._open_weights(state)
        assert state.pending is not None  # _epochs merges only a pending offer
        _, offer = state.pending
        state.pending = None
        g, gap = int(offer["index"]), int(offer["version"]) - job["version"] + 1
        phi = device_phi(state.gamma, state.upsilon, max(g, 1), gap)
        beta = clamp(squash(max(phi, 0.0), p.mu_beta), 0.0, p.beta_max)
        with torch.no_grad():
            self.model.load_state_dict(local)
            loss_b = float(F.cross_entropy(self.model(x), y))
        merged = mix_models(local, offer["weights"], beta)
        self.model.load_state_dict(merged)
        params = [(n, q) for n, q in self.model.named_parameters() if q.requires_grad]
        for _, q in params:
            q.grad = None
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        dot = 0.0
        for n, q in params:
            assert q.grad is not None  # every parameter took part in the loss
            diff = offer["weights"][n].to(torch.float64) - local[n].to(torch.float64)
            dot += float((diff * q.grad.double()).sum())
        d_gamma, d_upsilon = merge_gradients(dot, state.gamma, state.upsilon, max(g, 1), gap, p.mu_beta, phi)
        state.gamma -= p.eta_gamma * d_gamma
        state.upsilon -= p.eta_upsilon * d_upsilon
        reward = loss_b - float(loss.detach())
        meta = state.meta
        meta.update(fresh_version=int(offer["version"]), beta=beta, reward=reward)
        meta["fresh_bytes"] = job["model_bytes"]
        self._learn_slot(state, reward)

    # --- local SGD (Eq. 6) -----------------------------------------------------------------------
    def _train(self, state: MUClientState, first: int, last: int) -> dict[str, Any] | None:
        job = state.job
        self.model.load_state_dict(self._open_weights(state))
        self.model.train()
        params = [q for q in self.model.parameters() if q.requires_grad]
        opt = torch.optim.SGD(params, lr=job["lr"], weight_decay=self.train_cfg.weight_decay)
        with seeded_if(self.random_layers, state.torch_gen):
            self._epochs(state, opt, params, first, last)
        state.weights = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        if last < self.p.local_epochs:
            return None
        if state.pending is not None:
            raise RuntimeError(
                f"invariant broken: client {state.client} ends a training with a fresh model unmerged"
            )
        out = {"weights": state.weights, "meta": dict(state.meta)}
        state.weights, state.job = None, {}
        state.jobs += 1
        return out

    def _epochs(
        self,
        state: MUClientState,
        opt: torch.optim.Optimizer,
        params: Sequence[torch.Tensor],
        first: int,
        last: int,
    ) -> None:
        """Local epochs ``first``..``last`` of Eq. (6), merging a pending fresh model at an epoch's start."""
        job = state.job
        for epoch in range(first, last + 1):
            for step in range(job["epoch_steps"]):
                with profiling.section("client.data"):
                    x, y = self.next_batch(state)
                if (
                    step == 0
                    and state.pending is not None
                    and state.pending[0] <= job["boundaries"][epoch - 1]
                ):
                    with profiling.section("client.merge"):
                        state.weights = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
                        self._merge(state, x, y)  # the model now holds the merged weights and g_m
                else:
                    with profiling.section("client.forward_backward", len(y)):
                        opt.zero_grad(set_to_none=True)
                        F.cross_entropy(self.model(x), y).backward()
                with profiling.section("client.optimizer"):
                    clip(params, self.train_cfg.clip_grad_norm)
                    opt.step()
                state.meta["steps"] += 1
