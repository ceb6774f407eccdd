"""GAS server logic (Algorithm 1): activation buffer, statistics, generation, server update, model buffer.

Runs inside the server actor; calls arrive in virtual-time order. Device placement (a GPU server): the
models, the buffered activations and their labels, the statistics' means and covariances, the Cholesky
factors and the generated activations live on ``device``; each received tensor is moved there once. Labels,
activation weights, statistic weights and version counters are also kept on the CPU, where every
data-dependent decision (flush, merge, how many to generate) is taken, so a call reads nothing back from
the device except the gradient it returns (and, per new factorisation, its success flag).

Contract:
    ``on_activations(client, batch, version, e) -> G_k``   steps ② ③ ④ (eqs. (4)-(7))
    ``on_client_model(client, weights, n_k) -> w_c``       step ⑥ (eqs. (9)-(10)); returns the current
                                                          client-side model for the next selected client
    ``client_weights() -> w_c``                            the current aggregated client-side model
    ``evaluate() -> dict``                                 test accuracy/loss of [w_c, w_s] plus counters
                                                          (and the gradient dissimilarity when measured)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from raysfl import profiling
from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.common.aggregate import weighted_average
from raysfl.algorithms.common.device import (
    device_generator,
    load_into,
    loss_zero,
    mean_training_loss,
    to_device,
)
from raysfl.algorithms.common.evaluate import evaluate_split
from raysfl.algorithms.common.optim import clip, make_optimizer
from raysfl.algorithms.gas.dissimilarity import GradientDissimilarity
from raysfl.algorithms.gas.generate import GaussianSampler, generation_counts, log_prior, staleness_weight
from raysfl.algorithms.gas.lowrank import LowRankSampler
from raysfl.algorithms.gas.params import GASParams
from raysfl.algorithms.gas.stats import LabelGaussians

Batch = tuple[torch.Tensor, torch.Tensor]


class GASServer:
    """Server-side state and updates of GAS. Pure torch: unit-testable without Ray."""

    dissimilarity: GradientDissimilarity | None = None
    """The gradient-dissimilarity meter, when ``dissimilarity_every`` is set (also for older checkpoints)."""

    def __init__(
        self,
        setup: RunSetup,
        client_model: torch.nn.Module,
        server_model: torch.nn.Module,
        test_x: torch.Tensor,
        test_y: torch.Tensor,
        seed: int,
        device: str = "cpu",
    ) -> None:
        self.setup = setup
        self.p: GASParams = setup.params
        self.train = setup.scenario.train
        self.device = torch.device(device)
        # w_c stays on the host (it goes to the pools); copied before the module moves to the device
        self.global_client = {k: v.detach().cpu().clone() for k, v in client_model.state_dict().items()}
        self.client_model = client_model.to(self.device)
        self.server_model = server_model.to(self.device)
        self.optimizer = make_optimizer(self.server_model.parameters(), self.train)
        self.test_x, self.test_y = test_x, test_y
        self.act_shape: tuple[int, ...] = ()
        self.stats: LabelGaussians | None = None
        self.sampler: GaussianSampler | LowRankSampler | None = None
        self.log_priors = torch.stack(
            [log_prior(torch.as_tensor(h), self.p.la_tau) for h in np.asarray(setup.label_hist)]
        ).to(self.device)
        self.gen = device_generator(self.device, seed)  # draws the generated activations on the device
        # (activations, labels) on the device, (weights, labels) on the CPU, per arrival
        self.buffer: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self.model_buffer: list[tuple[dict[str, torch.Tensor], float]] = []
        self.server_updates = 0
        self.aggregations = 0
        self.generated_total = 0
        self.train_loss_sum = loss_zero(self.device)  # float64 on the device: summed without a sync per step
        self.train_loss_count = 0
        self._progress_total = 1  # code-mode counters (specs/gas.md §10.6)
        self._progress_totals = [1]  # the count after each aggregation: index = model version
        self._progress_client: dict[int, int] = {}
        self.dissimilarity = (
            GradientDissimilarity(
                self.p.dissimilarity_every, self.p.dissimilarity_samples, test_x, test_y, seed
            )
            if self.p.dissimilarity_every
            else None
        )

    # --- step ② ③ ④ -------------------------------------------------------------------------------
    def on_activations(self, client: int, batch: Batch, version: int, e: int) -> torch.Tensor:
        """Store A_k (eq. (4)), update the statistics, maybe update w_s (eq. (5)); return G_k (eq. (7))."""
        labels_cpu = batch[1].cpu()  # the pools send CPU tensors: no copy
        acts, labels = to_device(batch[0], self.device), to_device(labels_cpu, self.device)
        self._ensure_stats(acts)
        weight = staleness_weight(
            self._progress(client, version, e), self.p.weighting, self.p.weight_a, self.p.weight_b
        )
        weights = torch.full((len(labels_cpu),), float(weight), dtype=torch.float64)  # CPU
        if self.p.server_update == "before-gradient":
            self._store(acts, (labels, labels_cpu), weights)
            grads = self._client_gradient(client, acts, labels)
        else:
            grads = self._client_gradient(client, acts, labels)
            self._store(acts, (labels, labels_cpu), weights)
        return grads.cpu()  # the one host copy of the call: G_k goes back to the pool

    def _progress(self, client: int, version: int, e: int) -> int:
        """n(A): tE + e with t the model version the client trains [P], or the code's counters [C].

        The code's rule (specs/gas.md §10.6, GAS_main.py ``weight_count``): a client selected when the global
        count was c tags its e-th activation of the job with c + e − 1; the count starts at 1 and grows at
        each aggregation by the number of server updates so far (``total_weight_count += local_epoch``).
        A client is selected right after the aggregation that produced the model it trains, so the count at
        selection is the one after ``version`` aggregations, whatever aggregations happen before its first
        activation arrives.
        """
        if self.p.progress == "paper":
            return version * self.train.local_iterations + e
        if e == 1:
            self._progress_client[client] = self._progress_totals[version]
        n = self._progress_client[client]
        self._progress_client[client] = n + 1
        return n

    def _ensure_stats(self, acts: torch.Tensor) -> None:
        if self.stats is None:
            self.act_shape = tuple(acts.shape[1:])
            dim = int(np.prod(self.act_shape))
            dtype = torch.float32 if self.p.covariance == "full" else torch.float64
            self.stats = LabelGaussians(self.setup.num_classes, dim, self.p.covariance, dtype, self.device)
            ridge = 0.0 if self.p.stats_update == "per-flush" else self.p.ridge
            if self.p.sampler == "low-rank":
                self.sampler = LowRankSampler(self.stats, ridge, self.p.low_rank_rows)
            else:
                self.sampler = GaussianSampler(self.stats, ridge)

    def _store(
        self, acts: torch.Tensor, labels: tuple[torch.Tensor, torch.Tensor], weights: torch.Tensor
    ) -> None:
        """Buffer A_k with its labels (on the device, and the host copy) and weights; maybe flush."""
        assert self.stats is not None
        labels_dev, labels_cpu = labels
        self.buffer.append((acts.detach(), labels_dev, weights, labels_cpu))
        if self.p.generate and self.p.stats_update == "per-activation":
            with profiling.section("server.stats"):
                self.stats.update(acts, labels_cpu, weights)
        if len(self.buffer) >= self.p.q_s:
            self._server_update()

    def _client_gradient(self, client: int, acts: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """G_k = ∇_{A_k} l_k(w_s; A_k, Y_k), with the logit-adjusted loss of eq. (6) when enabled."""
        with profiling.section("server.grad", len(labels)):
            a = acts.detach().requires_grad_(True)
            self.server_model.train()
            logits = self.server_model(a)
            if self.p.logit_adjustment:
                logits = logits + self.log_priors[client]
            loss = F.cross_entropy(logits, labels)
            (grads,) = torch.autograd.grad(loss, a)
        return grads

    def _server_update(self) -> None:
        """Concatenate the buffer with generated activations and take one step on w_s (eq. (5))."""
        assert self.stats is not None and self.sampler is not None
        real_x = torch.cat([b[0] for b in self.buffer])
        real_y = torch.cat([b[1] for b in self.buffer])
        # (a buffer restored from a checkpoint of an older version holds no host copy of the labels)
        real_y_cpu = torch.cat([b[3] if len(b) > 3 else b[1].cpu() for b in self.buffer])
        if self.p.generate and self.p.stats_update == "per-flush":
            # the code's IncrementalStats.update: a label's first batch initialises its statistics as they
            # are; every later merge adds ridge·I (specs/gas.md §10.5) [C]
            merged = [y for y in torch.unique(real_y_cpu).tolist() if self.stats.has(y)]
            weights = torch.cat([b[2] for b in self.buffer])
            with profiling.section("server.stats"):
                self.stats.update(real_x, real_y_cpu, weights)
                self.stats.add_ridge(merged, self.p.ridge)
        xs, ys = [real_x], [real_y]
        available = self.stats.weight > 0
        gated = self.p.generation_gate == "all-labels" and not bool(available.all())
        if self.p.generate and not gated:  # the code generates only once all labels have statistics [C]
            counts = generation_counts(
                torch.bincount(real_y_cpu, minlength=self.setup.num_classes),
                available,
                self.p.generation,
                self.train.batch_size,
            )
            with profiling.section("server.sample"):
                gen_x, gen_y = self.sampler.sample(counts, self.gen)
            if len(gen_y):  # drawn on the device already
                xs.append(gen_x.reshape(-1, *self.act_shape))
                ys.append(gen_y)
                self.generated_total += len(gen_y)
        x, y = torch.cat(xs), torch.cat(ys)
        if self.dissimilarity is not None and self.dissimilarity.due(self.server_updates):
            with profiling.section("server.dissimilarity"):
                load_into(self.client_model, self.global_client)
                real = (real_x, real_y) if len(xs) > 1 else None
                self.dissimilarity.measure(self.client_model, self.server_model, (x, y), real)
        with profiling.section("server.update", len(y)):
            self.server_model.train()
            self.optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(self.server_model(x), y)
            loss.backward()
            clip(self.server_model.parameters(), self.train.clip_grad_norm)
            self.optimizer.step()
        self.train_loss_sum += loss.detach().to(torch.float64)
        self.train_loss_count += 1
        self.server_updates += 1
        self.buffer.clear()

    # --- step ⑥ ------------------------------------------------------------------------------------
    def on_client_model(
        self, client: int, weights: dict[str, torch.Tensor], num_samples: int
    ) -> dict[str, torch.Tensor]:
        """Add w_{c,k} to the model buffer (eq. (9)); aggregate when it holds Q_c models (eq. (10))."""
        self.model_buffer.append((weights, float(num_samples) if self.p.aggregation == "data-size" else 1.0))
        if len(self.model_buffer) >= self.p.q_c:
            states = [w for w, _ in self.model_buffer]
            with profiling.section("server.aggregate"):
                self.global_client = weighted_average(states, [n for _, n in self.model_buffer])
            self.model_buffer.clear()
            self.aggregations += 1
            self._progress_total += self.server_updates
            self._progress_totals.append(self._progress_total)
        return self.global_client

    def client_weights(self) -> dict[str, torch.Tensor]:
        """The current aggregated client-side model w_c."""
        return self.global_client

    def evaluate(self) -> dict[str, Any]:
        """Top-1 accuracy and loss of [w_c, w_s] on the test set (GAS §10.12), plus server counters."""
        load_into(self.client_model, self.global_client)
        acc, loss = evaluate_split(
            self.client_model,
            self.server_model,
            self.test_x,
            self.test_y,
            self.train.eval_batch_size,
            self.device,
        )
        mean_train = mean_training_loss(self.train_loss_sum, self.train_loss_count)
        self.train_loss_sum, self.train_loss_count = loss_zero(self.device), 0
        return {
            "accuracy": acc,
            "loss": loss,
            "train_loss": mean_train,
            "server_updates": self.server_updates,
            "aggregations": self.aggregations,
            "generated": self.generated_total,
            **(self.dissimilarity.report() if self.dissimilarity is not None else {}),
        }
