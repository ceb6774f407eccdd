"""FedASMU / FedSSMU server: per-arrival staleness-aware mixing with learned per-device controls.

Contract with the engine (server actor, calls in virtual-time order):
    ``send_job(client, round) -> dict``       w_o, its version o and, for a device's first training under
                                              ``request_slot = "rl"``, the meta-model's slot proposal
    ``fresh_model() -> dict``                 the current global model for a mid-training request: weights,
                                              version and the √-index g of Eq. (10)
    ``on_client_model(client, upload, n)``    Algorithm 1 lines 8-17 / Algorithm 3: staleness s = v − o + 1
                                              (FedSSMU: k + 1, the same number since a round's base is
                                              w_{g,0}); discard if s > τ; else update (λ, σ, ι) (Eq. 3),
                                              α (Eq. 2), w ← (1 − α)w + αw^i (Eq. 1)
    ``evaluate() -> dict``                    accuracy, loss and counters (discards, mean α, fresh downloads)

A discarded upload does not change the version (spec §2.3 [A]). The upload also carries the device's
reward 𝓡 of its merge, which updates the meta-model baseline and, for a first training, θ (Eq. 7).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from raysfl.algorithms.common.fl_server import FLServer, Weights, mix_models
from raysfl.algorithms.fedasmu.control import (
    AggregationRecord,
    ServerControls,
    clamp,
    control_gradients,
    squash,
    staleness_xi,
)
from raysfl.algorithms.fedasmu.slots import MetaPolicy


def flat_params(weights: Mapping[str, torch.Tensor], names: tuple[str, ...]) -> torch.Tensor:
    """The named trainable tensors of a state dict, flattened into one float64 vector."""
    return torch.cat([weights[n].detach().reshape(-1).to(torch.float64) for n in names])


class MUServer(FLServer):
    """The FedASMU server; FedSSMU uses it with ``synchronous = True`` (√-index from the round)."""

    def __init__(self, *args: Any, seed: int = 0, synchronous: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.synchronous = synchronous
        self.names = tuple(n for n, p in self.full.named_parameters() if p.requires_grad)
        p = self.p
        self.controls: dict[int, ServerControls] = {}
        # own-record: client -> its last aggregation; literal-prev-version: version -> the aggregation that
        # produced it, kept while a job's base or the current model has that version
        self.records: dict[int, tuple[AggregationRecord, torch.Tensor]] = {}
        self.meta = MetaPolicy(p.lstm_hidden, p.rl_lr, p.baseline_rho, seed)
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.proposals: dict[int, int] = {}  # client -> proposed slot (first training, until its upload)
        self.served: set[int] = set()
        self.round = 0
        self.round_base = 0
        self.discarded = 0
        self.alpha_sum = 0.0
        self.aggregated = 0
        self.fresh_downloads = 0
        self.fresh_bytes = 0
        self.rewards = 0
        self.reward_sum = 0.0
        self.beta_sum = 0.0

    # --- engine-facing ---------------------------------------------------------------------------
    def send_job(self, client: int, round_index: int = 0) -> dict[str, Any]:
        """w_o and o for a training that starts now (and the meta-model's l* for a first training)."""
        if self.synchronous and round_index != self.round:
            self.round, self.round_base = round_index, self.version
        weights = self.send_model(client)
        proposal = None
        if self.p.request_slot == "rl" and client not in self.served:
            n = self.p.local_epochs - self.p.first_slot + 1
            pick = self.meta.net.sample(n, self.p.epsilon, self.rng)
            self.proposals[client] = pick
            proposal = self.p.first_slot + pick
        self.served.add(client)
        return {"weights": weights, "version": self.version, "proposal": proposal}

    def fresh_model(self) -> dict[str, Any]:
        """The newest global model for a mid-training request and the √-index g of Eq. (10)."""
        index = self.round if self.synchronous and self.p.sqrt_index == "round" else self.version
        return {"weights": self.global_weights, "version": self.version, "index": index}

    def on_client_model(self, client: int, upload: Mapping[str, Any], num_samples: int) -> None:
        """Take an upload: meta-model bookkeeping, then discard or aggregate (Alg. 1 lines 8-17)."""
        if client not in self.bases:
            raise RuntimeError(f"invariant broken: a model from client {client}, which has no open job")
        o, base = self.bases.pop(client)
        s = self.version - o + 1
        self.arrivals += 1
        self.staleness_sum += s - 1
        self.staleness_max = max(self.staleness_max, s - 1)
        self._meta_feedback(client, upload.get("meta", {}))
        if s > self.p.tau:
            self.discarded += 1
            return
        weights = {k: v.detach().cpu() for k, v in upload["weights"].items()}
        self._aggregate(client, weights, base, o, s, upload.get("meta", {}))

    # --- the method ------------------------------------------------------------------------------
    def sqrt_index(self) -> int:
        """T of √t in Eq. (2): aggregations so far + 1 (Alg. 1's 1-based loop), or the round g (FedSSMU)."""
        if self.synchronous and self.p.sqrt_index == "round":
            return max(self.round, 1)
        return self.version + 1

    def _aggregate(
        self, client: int, weights: Weights, base: Weights, o: int, s: int, meta: Mapping[str, Any]
    ) -> None:
        """Eqs. (3), (2), (1) for ``client``'s model trained from version ``o`` (staleness ``s``)."""
        p = self.p
        literal = p.control_record == "literal-prev-version"
        ctl = self.controls.setdefault(client, ServerControls(p.lambda0, p.sigma0, p.iota0))
        prev = self.records.get(o if literal else client)  # version 0 (the initial model): none
        if p.learn_alpha and prev is not None:
            self._learn(ctl, prev, weights, base, meta)
        t = self.sqrt_index()
        xi = max(staleness_xi(ctl.lam, ctl.sigma, ctl.iota, t, s), p.xi_min)
        alpha = clamp(squash(xi, p.mu_alpha), p.alpha_min, p.alpha_max)
        d = flat_params(weights, self.names) - flat_params(self.global_weights, self.names)
        self.alpha_sum += alpha
        self.aggregated += 1
        self._commit(mix_models(self.global_weights, weights, alpha))
        self.records[self.version if literal else client] = (AggregationRecord(t, s, xi), d)
        if literal:
            self._forget_unreachable_versions()

    def _forget_unreachable_versions(self) -> None:
        """Drop the records of versions that no open job started from and that are not current."""
        oldest = min([o for o, _ in self.bases.values()] + [self.version])
        for version in [v for v in self.records if v < oldest]:
            del self.records[version]

    def _learn(
        self,
        ctl: ServerControls,
        prev: tuple[AggregationRecord, torch.Tensor],
        weights: Weights,
        base: Weights,
        meta: Mapping[str, Any],
    ) -> None:
        """Eq. (3) with the gradients of Eqs. (4)-(5) through the aggregation ``prev`` (spec §3.3 item 4).

        ``prev`` is device i's own last aggregation, or the one that produced its base w_o
        (``control_record``); either way it is device i's (λ, σ, ι) that move.
        """
        p = self.p
        rec, d_prev = prev
        lr = float(meta.get("lr", self.train.lr))
        steps = p.local_epochs if p.grad_denominator == "epochs" else int(meta.get("steps", 1))
        delta = flat_params(weights, self.names) - flat_params(base, self.names)
        sign = -1.0 if p.alpha_grad_sign == "consistent" else 1.0
        g_dot_d = sign * float(delta @ d_prev) / (lr * steps)
        d_lam, d_sigma, d_iota = control_gradients(g_dot_d, ctl, rec, p.mu_alpha, p.sigma_derivative)
        ctl.lam -= p.eta_lambda * d_lam
        ctl.sigma -= p.eta_sigma * d_sigma
        ctl.iota -= p.eta_iota * d_iota
        if p.project_controls:
            ctl.lam, ctl.sigma, ctl.iota = max(ctl.lam, 0.0), max(ctl.sigma, 0.0), max(ctl.iota, 0.0)

    def _meta_feedback(self, client: int, meta: Mapping[str, Any]) -> None:
        """Counters of the device's fresh download; baseline b and θ from its reward (Eq. 7)."""
        pick = self.proposals.pop(client, None)
        if meta.get("fresh_version") is None:
            return
        self.fresh_downloads += 1
        self.fresh_bytes += int(meta.get("fresh_bytes", 0))
        self.beta_sum += float(meta.get("beta", 0.0))
        reward = meta.get("reward")
        if reward is None:
            return
        self.rewards += 1
        self.reward_sum += float(reward)
        self.meta.observe(float(reward))
        if pick is not None:
            n = self.p.local_epochs - self.p.first_slot + 1
            self.meta.reinforce(n, pick, float(reward))

    def control_table(self) -> dict[int, tuple[float, float, float]]:
        """(λ, σ, ι) per device that has been aggregated at least once."""
        return {k: (c.lam, c.sigma, c.iota) for k, c in sorted(self.controls.items())}

    def _counters(self) -> dict[str, Any]:
        lams = [c.lam for c in self.controls.values()] or [self.p.lambda0]
        sigmas = [c.sigma for c in self.controls.values()] or [self.p.sigma0]
        iotas = [c.iota for c in self.controls.values()] or [self.p.iota0]
        return {
            "discarded": self.discarded,
            "mean_alpha": self.alpha_sum / max(self.aggregated, 1),
            "mean_lambda": float(np.mean(lams)),
            "mean_sigma": float(np.mean(sigmas)),
            "mean_iota": float(np.mean(iotas)),
            "fresh_downloads": self.fresh_downloads,
            "bytes_down_fresh": self.fresh_bytes,
            "mean_beta": self.beta_sum / max(self.fresh_downloads, 1),
            "mean_reward": self.reward_sum / max(self.rewards, 1),
            "reward_baseline": self.meta.baseline,
            "meta_updates": self.meta.updates,
        }
