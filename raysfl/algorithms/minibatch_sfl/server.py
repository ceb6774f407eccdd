"""Server logic of the synchronous split baselines: MiniBatch-SFL and S2FL (specs/gas.md §8.1, §10.10).

One full copy of the model's layers lives here (:func:`full_stack`). Layers below the shallowest cut a client
may use are the global client-side model (changed only by the round-end aggregation); the server trains the
others. A client cut at ``c`` sends the activation of layer ``c``; the server runs layers ``[c, L)`` for it.

Contract (calls arrive in virtual-time order; one round = E iterations of all C clients, then aggregation):
    ``client_weights(split) -> state``                    layers [0, c) for a client cut at ``split``
    ``iteration(clients, splits, groups, *batches)``      all C activations of one local iteration: compute
                                                          every G_k with the current weights, then the
                                                          (grouped) server step; keeps the G_k
    ``gradient(client) -> G_k``                           hands out one client's gradient of that iteration
    ``aggregate(splits, sizes, *models)``                 round end: layer-wise |D_k|-weighted average
    ``evaluate() -> dict``                                test accuracy/loss of the full model, counters
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from raysfl.algorithms.common.device import load_into, loss_zero, mean_training_loss, to_device
from raysfl.algorithms.common.evaluate import evaluate_split
from raysfl.algorithms.common.optim import clip, make_optimizer
from raysfl.algorithms.config import TrainConfig
from raysfl.algorithms.minibatch_sfl.layers import client_prefix, full_stack, layer_of_key, layerwise_average

Batch = tuple[torch.Tensor, torch.Tensor]
GROUP_MOMENTUM = ("averaged", "sequential")


def _mean(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Element-wise mean in float64, cast back (integer tensors rounded, as :func:`weighted_average`)."""
    ref = tensors[0]
    acc = torch.stack([t.to(torch.float64) for t in tensors]).mean(0)
    return acc.to(ref.dtype) if ref.is_floating_point() else acc.round().to(ref.dtype)


class SyncSplitServer:
    """Server-side state and updates of MiniBatch-SFL and S2FL. Pure torch: unit-testable without Ray.

    Args:
        model: the scenario's :class:`raysfl.models.split.SplitModel` (its halves are joined into one stack).
        cuts: split name → number of client-side layers, for every split a client may be cut at.
        train: the scenario's ``[train]`` section (optimizer, clipping, evaluation batch).
        test_x, test_y: the transformed test set.
        device: where the stack lives.
        group_momentum: how the per-group server copies treat the optimizer state (S2FL; see
            :meth:`_grouped_step`): ``"averaged"`` [A] or ``"sequential"`` [C].
    """

    def __init__(
        self,
        model: Any,
        cuts: Mapping[str, int],
        train: TrainConfig,
        test_x: torch.Tensor,
        test_y: torch.Tensor,
        device: str = "cpu",
        group_momentum: str = "averaged",
    ) -> None:
        if group_momentum not in GROUP_MOMENTUM:
            raise ValueError(f"group_momentum must be one of {GROUP_MOMENTUM}, got {group_momentum!r}")
        self.train = train
        self.device = torch.device(device)
        self.full = full_stack(model).to(self.device)
        self.cuts = dict(cuts)
        self.group_momentum = group_momentum
        names = [n for n, _ in self.full.named_children()]
        self.layer_index = {n: i for i, n in enumerate(names)}
        if not self.cuts or not all(0 < c < len(names) for c in self.cuts.values()):
            raise ValueError(f"every cut must leave layers on both sides of the {len(names)}-layer stack")
        low = min(self.cuts.values())
        self.server_params = [
            (n, p) for n, p in self.full.named_parameters() if self.layer_index[layer_of_key(n)] >= low
        ]
        self.optimizer = make_optimizer([p for _, p in self.server_params], train)
        self.test_x, self.test_y = test_x, test_y
        self.pending: dict[int, torch.Tensor] = {}
        self.server_updates = 0
        self.rounds = 0
        self.train_loss_sum = loss_zero(self.device)
        self.train_loss_count = 0

    # --- round start -------------------------------------------------------------------------------
    def client_weights(self, split: str) -> dict[str, torch.Tensor]:
        """The current weights of layers ``[0, c)`` for a client cut at ``split`` (CPU copies)."""
        part = client_prefix(self.full, self.cuts[split])
        return {k: v.detach().cpu().clone() for k, v in part.state_dict().items()}

    # --- one local iteration -----------------------------------------------------------------------
    def iteration(
        self,
        clients: Sequence[int],
        splits: Sequence[str],
        groups: Sequence[Sequence[int]],
        *batches: Batch,
    ) -> None:
        """All C activations of one iteration: G_k for each client, then one (grouped) server step.

        MiniBatch-SFL (specs/gas.md §10.10): every G_k = ∇_{A_k} CE(w_s; A_k, Y_k) is computed with the
        *same* current server weights (plain cross-entropy, no logit adjustment); then the server takes one
        step on the concatenation of all C activations. S2FL: ``groups`` (positions into ``clients``)
        partition the clients; each group's concatenation updates its own copy of the server weights and
        the copies are averaged (:meth:`_grouped_step`).

        Args:
            clients: the C client ids, in the order of ``batches``.
            splits: per client, the split it trains at (a key of ``cuts``).
            groups: a partition of ``range(C)``; ``[[0, ..., C-1]]`` for MiniBatch-SFL.
            batches: per client, ``(A_k, Y_k)``.
        """
        if not (len(clients) == len(splits) == len(batches)):
            raise ValueError("iteration needs one split and one batch per client")
        if sorted(i for g in groups for i in g) != list(range(len(clients))):
            raise ValueError(f"groups {groups!r} are not a partition of the {len(clients)} clients")
        cuts = [self.cuts[s] for s in splits]
        acts = [to_device(b[0], self.device) for b in batches]
        labels = [to_device(b[1], self.device) for b in batches]
        for k, c, a, y in zip(clients, cuts, acts, labels, strict=True):
            self.pending[int(k)] = self._client_gradient(c, a, y).cpu()
        self._grouped_step(cuts, acts, labels, groups)
        self.server_updates += 1

    def gradient(self, client: int) -> torch.Tensor:
        """G_k of ``client`` from the last :meth:`iteration` (handed out once)."""
        return self.pending.pop(int(client))

    def _client_gradient(self, cut: int, acts: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """G_k = ∇_{A_k} CE(layers[cut:](A_k), Y_k) at the current weights.

        Running statistics (BatchNorm) touched by this forward are restored: only the server step moves
        them, as in the reference code, where the per-client pass is discarded by reloading w_s [C].
        """
        saved = {n: b.clone() for n, b in self.full.named_buffers()}
        a = acts.detach().requires_grad_(True)
        self.full.train()
        loss = F.cross_entropy(self.full[cut:](a), labels)
        (grads,) = torch.autograd.grad(loss, a)
        if saved:
            with torch.no_grad():
                for n, b in self.full.named_buffers():
                    b.copy_(saved[n])
        return grads

    def _group_loss(
        self, cuts: Sequence[int], acts: Sequence[torch.Tensor], labels: Sequence[torch.Tensor]
    ) -> torch.Tensor:
        """Mean cross-entropy of one group's concatenation (eq. of the server step, specs/gas.md §10.10).

        Clients of the group may be cut at different layers: each activation first runs through the server's
        layers up to the group's deepest cut, then the concatenation runs through the rest.
        """
        deepest = max(cuts)
        parts = [self.full[c:deepest](a.detach()) for c, a in zip(cuts, acts, strict=True)]
        return F.cross_entropy(self.full[deepest:](torch.cat(parts)), torch.cat(list(labels)))

    def _step(self, loss: torch.Tensor) -> set[str]:
        """Back-propagate ``loss``, clip, step; return the names of the parameters that got a gradient."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        params = [p for _, p in self.server_params]
        clip(params, self.train.clip_grad_norm)
        trained = {n for n, p in self.server_params if p.grad is not None}
        self.optimizer.step()
        return trained

    def _grouped_step(
        self,
        cuts: Sequence[int],
        acts: Sequence[torch.Tensor],
        labels: Sequence[torch.Tensor],
        groups: Sequence[Sequence[int]],
    ) -> None:
        """One server step; with several groups, one step per group from the same start, then averaged.

        S2FL activation grouping (specs/gas.md §10.10): group g steps its own copy w_s^g from w_s on its
        concatenation; afterwards w_s = mean_g w_s^g (1/#groups), per parameter over the groups that gave
        it a gradient (a layer no group's clients reach keeps its value). Buffers are averaged over the
        groups whose forward ran the layer. The optimizer state: ``"averaged"`` restores it before every
        group and averages the groups' states too [A] (with SGD this makes the result one step on the mean
        of the group gradients); ``"sequential"`` lets the groups step one shared optimizer in turn and
        keeps what the last group left, as the code's single ``optimizer_up`` does [C].
        """
        self.full.train()
        if len(groups) == 1:
            (g,) = groups
            loss = self._group_loss([cuts[i] for i in g], [acts[i] for i in g], [labels[i] for i in g])
            self._step(loss)
            self._record_loss(loss, 1.0)
            return
        params = dict(self.server_params)
        buffers = dict(self.full.named_buffers())
        start_p = {n: p.detach().clone() for n, p in params.items()}
        start_b = {n: b.clone() for n, b in buffers.items()}
        start_opt = {n: self._opt_state(p) for n, p in params.items()}
        results: list[tuple[set[str], dict[str, torch.Tensor], dict[str, dict[str, Any]], int]] = []
        total = sum(len(y) for y in labels)
        for gi, g in enumerate(groups):
            if gi > 0:
                self._load(params, buffers, start_p, start_b)
                if self.group_momentum == "averaged":
                    for n, p in params.items():
                        self._set_opt_state(p, start_opt[n])
            loss = self._group_loss([cuts[i] for i in g], [acts[i] for i in g], [labels[i] for i in g])
            trained = self._step(loss)
            self._record_loss(loss, sum(len(labels[i]) for i in g) / total, count=gi == 0)
            state = {n: p.detach().clone() for n, p in params.items() if n in trained}
            state.update({n: b.clone() for n, b in buffers.items()})
            opt = {n: self._opt_state(params[n]) for n in trained}
            results.append((trained, state, opt, min(cuts[i] for i in g)))
        with torch.no_grad():
            for n, p in params.items():
                vals = [r[1][n] for r in results if n in r[0]]
                p.copy_(_mean(vals) if vals else start_p[n])
                if self.group_momentum == "averaged":
                    states = [r[2][n] for r in results if n in r[0]]
                    self._set_opt_state(p, _mean_state(states) if states else start_opt[n])
            for n, b in buffers.items():
                layer = self.layer_index[layer_of_key(n)]
                vals = [r[1][n] for r in results if layer >= r[3]]
                b.copy_(_mean(vals) if vals else start_b[n])

    def _record_loss(self, loss: torch.Tensor, share: float, count: bool = True) -> None:
        self.train_loss_sum += loss.detach().to(torch.float64) * share  # on the device: no sync per step
        self.train_loss_count += int(count)

    @staticmethod
    def _load(
        params: Mapping[str, torch.Tensor],
        buffers: Mapping[str, torch.Tensor],
        p_vals: Mapping[str, torch.Tensor],
        b_vals: Mapping[str, torch.Tensor],
    ) -> None:
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(p_vals[n])
            for n, b in buffers.items():
                b.copy_(b_vals[n])

    def _opt_state(self, p: torch.Tensor) -> dict[str, Any]:
        st = self.optimizer.state.get(p, {})
        return {k: v.clone() if torch.is_tensor(v) else v for k, v in st.items()}

    def _set_opt_state(self, p: torch.Tensor, st: dict[str, Any]) -> None:
        if st:
            self.optimizer.state[p] = {k: v.clone() if torch.is_tensor(v) else v for k, v in st.items()}
        else:
            self.optimizer.state.pop(p, None)

    # --- round end ------------------------------------------------------------------------------------
    def aggregate(
        self, splits: Sequence[str], sizes: Sequence[float], *models: dict[str, torch.Tensor]
    ) -> None:
        """Round end: the layer-wise |D_k|-weighted average of the client models (:func:`layerwise_average`).

        With one common cut this is MiniBatch-SFL's FedAvg of the client-side models (specs/gas.md §10.10);
        layers the server trained for some clients (S2FL, shallower cuts) enter with those clients' weight.
        Parameters are overwritten in place, so the server optimizer keeps its state.
        """
        if not (len(splits) == len(sizes) == len(models)):
            raise ValueError("aggregate needs one split and one size per client model")
        current = {k: v.detach().cpu() for k, v in self.full.state_dict().items()}
        new = layerwise_average(self.layer_index, current, models, [self.cuts[s] for s in splits], sizes)
        load_into(self.full, new, strict=False)
        self.rounds += 1

    # --- evaluation -------------------------------------------------------------------------------------
    def evaluate(self) -> dict[str, Any]:
        """Top-1 accuracy and loss of the full model on the test set (GAS §10.12), plus counters."""
        acc, loss = evaluate_split(
            nn.Sequential(), self.full, self.test_x, self.test_y, self.train.eval_batch_size, self.device
        )
        mean_train = mean_training_loss(self.train_loss_sum, self.train_loss_count)
        self.train_loss_sum, self.train_loss_count = loss_zero(self.device), 0
        return {
            "accuracy": acc,
            "loss": loss,
            "train_loss": mean_train,
            "server_updates": self.server_updates,
            "aggregations": self.rounds,
        }


def _mean_state(states: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Average optimizer states key by key (tensors averaged, other entries from the first state)."""
    out = dict(states[0])
    for k, v in states[0].items():
        if torch.is_tensor(v) and all(k in s for s in states):
            out[k] = _mean([s[k] for s in states])
    return out
