"""Server logic of CSE-FSL, FSL_AN, SplitFed V1 (FSL_MC) and SplitFed V2 (FSL_OC); CSE-FSL spec §2-§4.

The server holds the aggregated client-side model x_c (and auxiliary head a_c for the local-loss methods),
the server-side model(s) and the client-side models buffered for aggregation. It runs in the server actor;
calls arrive in the order the policy issues them (emulated-time order).

    one server model (CSE-FSL, FSL_OC):   every upload is one SGD step on x_s, in the order received
                                          (eq. 11: x_s ← x_s − η ∇F_s(x_s; g_{x_{c,i}}(z)))
    copies (FSL_MC, FSL_AN):              client i's uploads step its own copy x_{s,i}; at each aggregation
                                          the copies are FedAvg-ed into x_s (``average_server_copies``)
    gradient methods (FSL_MC, FSL_OC):    the step also returns dL/d(smashed), computed with the pre-step x_s
    aggregation (eq. 14):                 x_c ← Σ w_i x_{c,i}, a_c ← Σ w_i a_{c,i}; w_i = 1/n [P] or
                                          |D_i|/Σ|D_j| [C]

Accounting ("counted from the tensors actually sent"): every tensor the server receives (smashed data,
labels, client models) or sends (gradients, models) is counted with :func:`tensor_bytes`, by kind; storage
is the number of values of the server-side model copies plus the buffered client models, tracked at every
change (its peak is Table V's "Storage", spec §3.4). :meth:`evaluate` returns these counters.

Contract with the engine:
    ``begin_round(clients, round)``                  the participants of a round (creates server copies)
    ``send_model(client) -> weights``               the current x_c (+ a_c) for a client (a model download)
    ``on_smashed(client, batch, lr) -> g``           one server step on (smashed, labels); g = dL/d(smashed)
                                                    for gradient methods, None otherwise
    ``on_client_model(client, weights, n_k)``       buffer a trained client model (an upload)
    ``aggregate()``                                 FedAvg the buffered models (and server copies)
    ``evaluate() -> dict``                          accuracy/loss of [x_c, x_s] (and of [x_c, a_c]) + counters
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.common.aggregate import weighted_average
from raysfl.algorithms.common.device import load_into, loss_zero, mean_training_loss, to_device
from raysfl.algorithms.common.evaluate import evaluate_split_aux
from raysfl.algorithms.common.fsl_accounting import GIB, tensor_bytes, tensor_numel
from raysfl.algorithms.common.fsl_round import FSLRules, normal_init
from raysfl.algorithms.common.optim import clip, make_optimizer
from raysfl.algorithms.common.own_rng import seeded

Weights = dict[str, Any]
SHARED = -1  # key of the single server model


@dataclass
class ServerCopy:
    """One server-side model's trainable tensors, buffers and optimizer."""

    params: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    optimizer: torch.optim.Optimizer

    def tensors(self) -> dict[str, torch.Tensor]:
        """The copy's parameters and buffers, detached, where they live (the server's device): read, not kept.

        Averaging and evaluation read them there (no device-to-host copy per tensor); what they build
        from them are new tensors, so the copy's training never changes a stored average.
        """
        return {
            **{n: t.detach() for n, t in self.params.items()},
            **{n: t.detach() for n, t in self.buffers.items()},
        }


class FSLServer:
    """Server state and updates of the four methods, selected by :class:`FSLRules`. Pure torch."""

    def __init__(
        self,
        setup: RunSetup,
        rules: FSLRules,
        model: Any,
        test_x: torch.Tensor,
        test_y: torch.Tensor,
        seed: int,
        device: str = "cpu",
    ) -> None:
        self.setup = setup
        self.rules = rules
        self.train = setup.scenario.train
        self.device = torch.device(device)
        if rules.local_loss and model.aux is None:
            raise RuntimeError(f"{rules.method} needs an auxiliary head (model.aux)")
        if rules.init_std > 0:
            normal_init([model.client, model.server, model.aux], rules.init_std, seed)
        self.gen = torch.Generator().manual_seed(seed)
        self.client_model = model.client.to(self.device)
        self.server_model = model.server.to(self.device)
        self.aux_model = model.aux.to(self.device) if rules.local_loss else None
        self.parts = ("client", "aux") if rules.local_loss else ("client",)
        self.global_models: dict[str, dict[str, torch.Tensor]] = {"client": _cpu_state(model.client)}
        if rules.local_loss:
            self.global_models["aux"] = _cpu_state(model.aux)
        # x_s: on the device, where the server copies start from and are averaged into
        self.global_server = {k: v.detach().clone() for k, v in self.server_model.state_dict().items()}
        self._param_names = [n for n, _ in self.server_model.named_parameters()]
        self.clip_norm = rules.max_grad_norm or self.train.clip_grad_norm
        self.copies: dict[int, ServerCopy] = {}
        if not rules.server_copies:
            self.copies[SHARED] = self._new_copy(self.global_server)
        self.copy_sizes: dict[int, int] = {}
        self.buffer: list[tuple[int, Weights, int]] = []
        self.test_x, self.test_y = test_x, test_y
        # counters
        self.bytes = {"smashed": 0, "labels": 0, "gradients": 0, "models_up": 0, "models_down": 0}
        self.uploads = 0
        self.server_steps = 0
        self.aggregations = 0
        self.rounds_started = 0
        self.storage_peak = 0
        self.storage_server_peak = 0
        self.train_loss_sum = loss_zero(self.device)
        self.train_loss_count = 0
        self._track_storage()

    # --- engine-facing ---------------------------------------------------------------------------
    def begin_round(self, clients: tuple[int, ...], round_index: int) -> None:
        """A round starts with ``clients``; with server copies each gets x_s (averaged) or keeps its own."""
        self.rounds_started += 1
        if self.rules.server_copies:
            if self.rules.average_server_copies:
                self.copies = {k: self._new_copy(self.global_server) for k in clients}
            else:  # each client keeps its own copy across rounds, created from x_s^0 on first use
                for k in clients:
                    if k not in self.copies:
                        self.copies[k] = self._new_copy(self.global_server)
        self._track_storage()

    def send_model(self, client: int) -> Weights:
        """The current x_c (+ a_c): a model download, counted."""
        del client
        out: Weights = (
            {p: self.global_models[p] for p in self.parts}
            if self.rules.local_loss
            else self.global_models["client"]
        )
        self.bytes["models_down"] += tensor_bytes(out)
        return out

    def on_smashed(
        self, client: int, batch: tuple[torch.Tensor, torch.Tensor], lr: float
    ) -> torch.Tensor | None:
        """One SGD step of the client's server model on the received minibatch (eq. 11).

        For gradient methods, returns dL/d(smashed) under the pre-step server model (counted as sent).
        """
        acts, labels = batch
        self.bytes["smashed"] += tensor_bytes(acts)
        self.bytes["labels"] += tensor_bytes(labels)
        self.uploads += 1
        copy = self.copies[client if self.rules.server_copies else SHARED]
        a = to_device(acts, self.device).detach()
        y = to_device(labels, self.device)
        if not self.rules.local_loss:
            a.requires_grad_(True)
        for group in copy.optimizer.param_groups:
            group["lr"] = lr
        self.server_model.train()
        with seeded(self.gen):
            logits = torch.func.functional_call(self.server_model, (copy.params, copy.buffers), (a,))
        loss = F.cross_entropy(logits, y)
        copy.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip(copy.params.values(), self.clip_norm)
        copy.optimizer.step()
        self.server_steps += 1
        self.train_loss_sum += loss.detach().to(torch.float64)  # on the device: no sync per step
        self.train_loss_count += 1
        if self.rules.local_loss:
            return None
        assert a.grad is not None
        grads = a.grad.detach().cpu()
        self.bytes["gradients"] += tensor_bytes(grads)
        return grads

    def on_client_model(self, client: int, weights: Weights, num_samples: int) -> None:
        """Buffer x_{c,i} (+ a_{c,i}) for aggregation: a model upload, counted."""
        self.bytes["models_up"] += tensor_bytes(weights)
        cpu = _to_cpu(weights)
        self.buffer.append((client, cpu, int(num_samples)))
        self.copy_sizes[client] = int(num_samples)
        self._track_storage()

    def aggregate(self) -> None:
        """Eq. 14: FedAvg of the buffered client models (and of the server copies); clears the buffer."""
        if not self.buffer:
            raise RuntimeError("invariant broken: aggregation with no buffered client model")
        weights = [self._weight(n) for _, _, n in self.buffer]
        if self.rules.local_loss:
            for part in self.parts:
                self.global_models[part] = weighted_average([w[part] for _, w, _ in self.buffer], weights)
        else:
            self.global_models["client"] = weighted_average([w for _, w, _ in self.buffer], weights)
        if self.rules.server_copies and self.rules.average_server_copies:
            members = [k for k, _, _ in self.buffer if k in self.copies]
            self.global_server = weighted_average(
                [self.copies[k].tensors() for k in members],
                [self._weight(self.copy_sizes[k]) for k in members],
            )
        self.buffer.clear()
        self.aggregations += 1

    def evaluate(self) -> dict[str, Any]:
        """Top-1 accuracy and loss of [x_c, x_s] on the test set; of [x_c, a_c] too; plus the counters."""
        load_into(self.client_model, self.global_models["client"])
        load_into(self.server_model, self._eval_server_state())
        if self.aux_model is not None:
            load_into(self.aux_model, self.global_models["aux"])
        acc, loss, aux_acc = self._test()
        b = self.bytes
        up = b["smashed"] + b["labels"] + b["models_up"]
        down = b["gradients"] + b["models_down"]
        load = b["smashed"] + b["gradients"] + b["models_up"] + b["models_down"]
        mean_train = mean_training_loss(self.train_loss_sum, self.train_loss_count)
        self.train_loss_sum, self.train_loss_count = loss_zero(self.device), 0
        out: dict[str, Any] = {
            "accuracy": acc,
            "loss": loss,
            "train_loss": mean_train,
            "aggregations": self.aggregations,
            "server_steps": self.server_steps,
            "uploads": self.uploads,
            "bytes_up_smashed": b["smashed"],
            "bytes_up_labels": b["labels"],
            "bytes_up_models": b["models_up"],
            "bytes_down_gradients": b["gradients"],
            "bytes_down_models": b["models_down"],
            "bytes_up_counted": up,
            "bytes_down_counted": down,
            "load_bytes": load,
            "load_gib": load / GIB,
            "storage_params": self.storage_peak,
            "storage_server_params": self.storage_server_peak,
            "storage_mparams": self.storage_peak / 1e6,
        }
        if aux_acc is not None:
            out["aux_accuracy"] = aux_acc
        return out

    # --- internals --------------------------------------------------------------------------------
    def _weight(self, num_samples: int) -> float:
        return float(num_samples) if self.rules.aggregation == "data-size" else 1.0

    def _new_copy(self, state: dict[str, torch.Tensor]) -> ServerCopy:
        moved = {n: to_device(t.detach(), self.device, copy=True) for n, t in state.items()}  # one copy
        params = {n: moved[n].requires_grad_(True) for n in self._param_names}
        buffers = {n: t for n, t in moved.items() if n not in params}
        return ServerCopy(params, buffers, make_optimizer(list(params.values()), self.train))

    def _eval_server_state(self) -> dict[str, torch.Tensor]:
        if not self.rules.server_copies:
            return self.copies[SHARED].tensors()
        if self.rules.average_server_copies or not self.copies:
            return self.global_server
        # separate copies: evaluate their plain average (not installed anywhere)
        return weighted_average([c.tensors() for c in self.copies.values()], [1.0] * len(self.copies))

    def _track_storage(self) -> None:
        server = sum(tensor_numel(c.params) + tensor_numel(c.buffers) for c in self.copies.values())
        buffered = sum(tensor_numel(w) for _, w, _ in self.buffer)
        self.storage_server_peak = max(self.storage_server_peak, server)
        self.storage_peak = max(self.storage_peak, server + buffered)

    @torch.no_grad()
    def _test(self) -> tuple[float, float, float | None]:
        return evaluate_split_aux(
            self.client_model,
            self.server_model,
            self.aux_model,
            self.test_x,
            self.test_y,
            self.train.eval_batch_size,
            self.device,
        )


def _cpu_state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


def _to_cpu(weights: Any) -> Any:
    if isinstance(weights, torch.Tensor):
        return weights.detach().cpu()
    return {k: _to_cpu(v) for k, v in weights.items()}
