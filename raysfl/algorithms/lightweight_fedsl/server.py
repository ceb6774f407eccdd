"""Server side of (lightweight) FedSL: one server-side model, averaged gradients, client-model FedAvg.

Per round t (Alg. 1 l. 8-11, spec §3.2): the K uploads arrive together (barrier). For each client k the
server rebuilds Ã_k from the received kept values and the shared dropout mask, runs w_{s,t} on it, and
computes g_{s,k,t} (eq. (5)) and ∂F/∂Ã_k, all with the same w_{s,t}; then

    w_{s,t+1} = w_{s,t} − (η/K) Σ_k g_{s,k,t}                                           (eq. (7))

and hands each client its ∂F/∂Ã_k at the kept positions only. Every I rounds it averages the client-side
models with equal weights 1/K, parameters and BatchNorm buffers alike (eq. (14)), and sends the average back.

Accounting: every tensor received (kept activation values, labels, bitmaps, client models) and sent
(gradient values, aggregated models) is counted with :func:`tensor_bytes`; the policy predicts the same bytes
from sizes (:mod:`accounting`), and a test checks they agree.

Contract with the engine (calls in emulated-time order):
    ``step(round, clients, *uploads)``    one synchronous server update from all K uploads (eq. (4)-(7))
    ``gradient(client) -> values``         client's ∂F/∂Ã at its kept positions (handed out once)
    ``aggregate(*weights)``               eq. (14)
    ``send_model(client) -> weights``     the aggregated client-side model (a download, counted)
    ``evaluate() -> dict``                test accuracy/loss of [w_c, w_s] and the counters
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch
import torch.nn.functional as F

from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.common.aggregate import weighted_average
from raysfl.algorithms.common.device import load_into, loss_zero, mean_training_loss, to_device
from raysfl.algorithms.common.evaluate import evaluate_split
from raysfl.algorithms.common.fsl_accounting import tensor_bytes
from raysfl.algorithms.lightweight_fedsl.dropout import dropout_mask, gather, restore

Upload = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]


class FedSLServer:
    """Server state of lightweight FedSL. Pure torch.

    Args:
        setup: the run setup (params, train section, input shape).
        model: the split model with the run's initial weights.
        test_x, test_y: the transformed test set.
        seed: the scenario seed (the dropout masks are derived from it and from client and round).
        device: where the server-side model lives.
    """

    def __init__(
        self, setup: RunSetup, model: Any, test_x: torch.Tensor, test_y: torch.Tensor, seed: int, device: str
    ) -> None:
        self.p = setup.params
        self.train = setup.scenario.train
        self.seed = seed
        self.device = torch.device(device)
        self.client_model = model.client.to(self.device)
        self.server_model = model.server.to(self.device)
        self.global_client = {k: v.detach().cpu().clone() for k, v in model.client.state_dict().items()}
        with torch.no_grad():
            probe = torch.zeros((1, *setup.input_shape), device=self.device)
            self.act_shape = tuple(self.client_model.eval()(probe).shape[1:])
        self.params = [p for p in self.server_model.parameters()]
        self.optimizer = torch.optim.SGD(
            self.params, lr=self.train.lr, momentum=self.train.momentum, weight_decay=self.train.weight_decay
        )
        self.test_x, self.test_y = test_x, test_y
        self.pending: dict[int, torch.Tensor] = {}
        self.bytes = {"smashed": 0, "labels": 0, "mask": 0, "gradients": 0, "models_up": 0, "models_down": 0}
        self.server_steps = 0
        self.aggregations = 0
        self.train_loss_sum = loss_zero(self.device)
        self.train_loss_count = 0

    # --- one round --------------------------------------------------------------------------------------
    def step(self, round_index: int, clients: Sequence[int], *uploads: Upload) -> None:
        """Eq. (4)-(7): ∂F/∂Ã_k and g_{s,k} for every client under w_{s,t}, then one averaged SGD step."""
        if len(clients) != len(uploads) or not clients:
            raise ValueError("step needs one upload per client (at least one)")
        acts, labels = [], []
        for k, (values, y, bitmap) in zip(clients, uploads, strict=True):
            self.bytes["smashed"] += tensor_bytes(values)
            self.bytes["labels"] += tensor_bytes(y)
            self.bytes["mask"] += tensor_bytes(bitmap) if bitmap is not None else 0
            shape = (len(y), *self.act_shape)
            mask = dropout_mask(
                self.seed, int(k), round_index, shape, self.p.dropout, self.p.dropout_granularity
            )
            a = restore(to_device(values, self.device), mask).requires_grad_(True)
            acts.append((int(k), a, mask))
            labels.append(to_device(y, self.device).long())
        self.server_model.train()
        self.optimizer.zero_grad(set_to_none=True)
        n = len(acts)
        if self.p.server_batching == "concatenated":
            logits = self.server_model(torch.cat([a for _, a, _ in acts]))
            parts = torch.split(logits, [len(y) for y in labels])
            loss = (
                cast(torch.Tensor, sum(F.cross_entropy(z, y) for z, y in zip(parts, labels, strict=True))) / n
            )
            loss.backward()
            self._record(loss.detach().to(torch.float64))
        else:
            for (_, a, _), y in zip(acts, labels, strict=True):
                loss = F.cross_entropy(self.server_model(a), y) / n  # the 1/K of eq. (7), accumulated
                loss.backward()
                self._record(loss.detach().to(torch.float64) * n)
        for k, a, mask in acts:
            assert a.grad is not None
            self.pending[k] = gather(a.grad.detach() * n, mask).cpu()  # ∂F_k/∂Ã_k (undo the 1/K)
        self.optimizer.step()
        self.server_steps += 1

    def gradient(self, client: int) -> torch.Tensor:
        """∂F/∂Ã of ``client`` at its kept positions (a downlink message, counted)."""
        g = self.pending.pop(int(client))
        self.bytes["gradients"] += tensor_bytes(g)
        return g

    # --- aggregation -------------------------------------------------------------------------------------
    def aggregate(self, *weights: dict[str, torch.Tensor]) -> None:
        """Eq. (14): w_c = (1/K) Σ_k w_{c,k} over parameters and buffers (zeros included)."""
        if not weights:
            raise RuntimeError("invariant broken: aggregation with no client model")
        for w in weights:
            self.bytes["models_up"] += tensor_bytes(w)
        cpu = [{k: v.detach().cpu() for k, v in w.items()} for w in weights]
        self.global_client = weighted_average(cpu, [1.0] * len(cpu))
        self.aggregations += 1

    def send_model(self, client: int) -> dict[str, torch.Tensor]:
        """The aggregated client-side model for ``client`` (a download, counted)."""
        del client
        self.bytes["models_down"] += tensor_bytes(self.global_client)
        return self.global_client

    # --- evaluation --------------------------------------------------------------------------------------
    def evaluate(self) -> dict[str, Any]:
        """Accuracy and loss of [w_c (last aggregate), w_s] on the test set, plus the byte counters."""
        load_into(self.client_model, self.global_client)
        acc, loss = evaluate_split(
            self.client_model,
            self.server_model,
            self.test_x,
            self.test_y,
            self.train.eval_batch_size,
            self.device,
        )
        b = self.bytes
        mean_train = mean_training_loss(self.train_loss_sum, self.train_loss_count)
        self.train_loss_sum, self.train_loss_count = loss_zero(self.device), 0
        prunable = [v for k, v in self.global_client.items() if k.endswith("weight") and v.dim() > 1]
        total = sum(v.numel() for v in prunable)
        return {
            "accuracy": acc,
            "loss": loss,
            "train_loss": mean_train,
            "server_steps": self.server_steps,
            "aggregations": self.aggregations,
            "client_sparsity": sum(int((v == 0).sum()) for v in prunable) / total if total else 0.0,
            "bytes_up_smashed": b["smashed"],
            "bytes_up_labels": b["labels"],
            "bytes_up_mask": b["mask"],
            "bytes_up_models": b["models_up"],
            "bytes_down_gradients": b["gradients"],
            "bytes_down_models": b["models_down"],
            "bytes_up_counted": b["smashed"] + b["labels"] + b["mask"] + b["models_up"],
            "bytes_down_counted": b["gradients"] + b["models_down"],
        }

    def _record(self, loss: torch.Tensor) -> None:
        self.train_loss_sum += loss  # float64 on the device: no sync per step
        self.train_loss_count += 1
