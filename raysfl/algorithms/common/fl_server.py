"""Server side shared by the FL baselines: the global full model, per-job start models, update arithmetic.

Contract with the engine (server actor, calls in virtual-time order):
    ``send_model(client) -> w``                       the current global model for a job that starts now; the
                                                      server remembers it (and its version) as the job's base
    ``on_client_model(client, weights, n_k) -> None``  a job's trained model arrives; the method decides what
                                                      to do (:meth:`FLServer._receive`)
    ``evaluate() -> dict``                            test accuracy and loss of the global model plus counters

Global models are never modified in place: every update builds a new dict, so a job's base (a reference
kept by :meth:`send_model`) stays what that job actually received, and the staleness of an arrival is the
number of global updates between its base and now, τ = t − τ_k (FedAsync, Xie et al. 2019, §3).

Update arithmetic runs in float64 on the CPU and is cast back to each tensor's dtype (integer buffers such
as BatchNorm's step counter are rounded), as :func:`raysfl.algorithms.common.aggregate.weighted_average`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from raysfl import profiling
from raysfl.algorithms.base import RunSetup
from raysfl.algorithms.common.device import load_into
from raysfl.algorithms.common.evaluate import evaluate_split

Weights = dict[str, torch.Tensor]
Delta = dict[str, torch.Tensor]


# --- update arithmetic ---------------------------------------------------------------------------------
def _cast(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return value.to(like.dtype) if like.is_floating_point() else value.round().to(like.dtype)


def model_delta(new: Mapping[str, torch.Tensor], old: Mapping[str, torch.Tensor]) -> Delta:
    """Δ = w_end − w_start key by key, in float64 (FedBuff's client update, Nguyen et al. 2022, Alg. 1)."""
    return {k: new[k].detach().to(torch.float64) - old[k].detach().to(torch.float64) for k in old}


def add_scaled(
    base: Mapping[str, torch.Tensor], terms: Sequence[tuple[float, Mapping[str, torch.Tensor]]]
) -> Weights:
    """Return w + Σ_i c_i·Δ_i, accumulated in float64 in the given order and cast back to ``base``'s dtypes.

    The one update rule behind FedAvg written in delta form (w + Σ p_k(w_k − w) = Σ p_k w_k when
    Σ p_k = 1, McMahan et al. 2017), FedBuff's w + η_g·(1/K)Σ s_i Δ_i and CA2FL's w + η·v. Sharing it makes
    FedBuff with η_g = 1 and K = C bit-identical to FedAvg when the coefficients are equal.

    Example:
        >>> w = {"a": torch.tensor([1.0, 2.0])}
        >>> add_scaled(w, [(0.5, {"a": torch.tensor([2.0, 0.0])}), (0.25, {"a": torch.tensor([0.0, 4.0])})])
        {'a': tensor([2., 3.])}
    """
    out: Weights = {}
    for key, ref in base.items():
        acc = ref.detach().to(torch.float64).clone()
        for coef, delta in terms:
            acc += float(coef) * delta[key].to(torch.float64)
        out[key] = _cast(acc, ref)
    return out


def mix_models(w: Mapping[str, torch.Tensor], w_k: Mapping[str, torch.Tensor], alpha: float) -> Weights:
    """FedAsync's server update x_t = (1 − α_t)·x_{t−1} + α_t·x_new (Xie et al. 2019, Algorithm 1).

    Example:
        >>> mix_models({"a": torch.tensor([0.0, 4.0])}, {"a": torch.tensor([2.0, 0.0])}, 0.25)
        {'a': tensor([0.5000, 3.0000])}
    """
    out: Weights = {}
    for key, ref in w.items():
        acc = (1.0 - alpha) * ref.detach().to(torch.float64) + alpha * w_k[key].detach().to(torch.float64)
        out[key] = _cast(acc, ref)
    return out


def staleness_weight(kind: str, staleness: int, a: float = 0.5, b: float = 4.0) -> float:
    """s(t − τ): how much an update τ = ``staleness`` global updates old counts (Xie et al. 2019, §5.2).

    ``constant``: s = 1; ``polynomial``: s = (t − τ + 1)^(−a); ``hinge``: s = 1 if t − τ ≤ b, else
    1 / (a·(t − τ − b) + 1). FedBuff's staleness scaling 1/√(1 + τ) (Nguyen et al. 2022) is the polynomial
    with a = 0.5.

    Example:
        >>> [round(staleness_weight("hinge", s, a=10, b=4), 4) for s in (0, 4, 5, 6)]
        [1.0, 1.0, 0.0909, 0.0476]
    """
    if staleness < 0:
        raise ValueError(f"staleness must be >= 0, got {staleness}")
    if kind == "constant":
        return 1.0
    if kind == "polynomial":
        return float((staleness + 1) ** (-a))
    if kind == "hinge":
        return 1.0 if staleness <= b else 1.0 / (a * (staleness - b) + 1.0)
    raise ValueError(f"unknown staleness function {kind!r}; use constant, polynomial or hinge")


def zeros_delta(like: Mapping[str, torch.Tensor]) -> Delta:
    """An all-zero float64 delta shaped like ``like`` (an empty cache entry, CA2FL h_i^0 = 0)."""
    return {k: torch.zeros(v.shape, dtype=torch.float64) for k, v in like.items()}


# --- the server ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Arrival:
    """A finished job as the server sees it.

    Attributes:
        client: k.
        weights: the trained model w_k.
        base: the global model the job started from (w at version τ_k).
        num_samples: |D_k|.
        staleness: t − τ_k, global updates since the job's base was sent.
    """

    client: int
    weights: Mapping[str, torch.Tensor]
    base: Mapping[str, torch.Tensor]
    num_samples: int
    staleness: int

    def delta(self) -> Delta:
        """Δ_k = w_k − w_{τ_k} in float64."""
        return model_delta(self.weights, self.base)


class FLServer:
    """The global full model, its version counter, the jobs' bases and evaluation; methods subclass it.

    Subclasses implement :meth:`_receive` and call :meth:`_commit` with each new global model.
    """

    def __init__(
        self,
        setup: RunSetup,
        model: Any,
        test_x: torch.Tensor,
        test_y: torch.Tensor,
        device: str = "cpu",
    ) -> None:
        self.setup = setup
        self.p = setup.params
        self.train = setup.scenario.train
        self.device = torch.device(device)
        self.parts = model  # SplitModel: .client then .server form the full model
        self.full = model.full().to(self.device)
        self.global_weights: Weights = {
            k: v.detach().cpu().clone() for k, v in self.full.state_dict().items()
        }
        self.test_x, self.test_y = test_x, test_y
        self.version = 0
        self.bases: dict[int, tuple[int, Weights]] = {}
        self.arrivals = 0
        self.staleness_sum = 0
        self.staleness_max = 0

    # --- engine-facing ------------------------------------------------------------------------------
    def send_model(self, client: int) -> Weights:
        """The global model for ``client``'s new job, remembered with its version as the job's base."""
        if client in self.bases:
            raise RuntimeError(f"invariant broken: client {client} got a model while its last job is open")
        self.bases[client] = (self.version, self.global_weights)
        return self.global_weights

    def on_client_model(self, client: int, weights: Mapping[str, torch.Tensor], num_samples: int) -> None:
        """A trained model arrives: compute its staleness against its base and hand it to the method."""
        if client not in self.bases:
            raise RuntimeError(f"invariant broken: a model from client {client}, which has no open job")
        version, base = self.bases.pop(client)
        staleness = self.version - version
        self.arrivals += 1
        self.staleness_sum += staleness
        self.staleness_max = max(self.staleness_max, staleness)
        cpu = {k: v.detach().cpu() for k, v in weights.items()}
        with profiling.section("server.aggregate"):  # the method's rule: buffer, maybe aggregate
            self._receive(Arrival(client, cpu, base, int(num_samples), staleness))

    def global_model(self) -> Weights:
        """The current global model (never modified in place)."""
        return self.global_weights

    def evaluate(self) -> dict[str, Any]:
        """Top-1 accuracy and loss of the global model on the test set, plus the server's counters."""
        load_into(self.full, self.global_weights)
        acc, loss = evaluate_split(
            self.parts.client,
            self.parts.server,
            self.test_x,
            self.test_y,
            self.train.eval_batch_size,
            self.device,
        )
        return {
            "accuracy": acc,
            "loss": loss,
            "updates": self.version,
            "arrivals": self.arrivals,
            "mean_staleness": self.staleness_sum / max(self.arrivals, 1),
            "max_staleness": self.staleness_max,
            **self._counters(),
        }

    # --- for the methods ------------------------------------------------------------------------------
    def _receive(self, arrival: Arrival) -> None:
        raise NotImplementedError

    def _counters(self) -> dict[str, Any]:
        return {}

    def _commit(self, weights: Weights) -> None:
        """Install a new global model: one global update, version t → t + 1."""
        self.global_weights = weights
        self.version += 1
