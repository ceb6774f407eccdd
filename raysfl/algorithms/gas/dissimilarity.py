"""GAS's gradient dissimilarity of the server-side update (Assumption 3, Lemma 1, Fig. 2(a)).

Assumption 3 bounds the bias that stragglers put into a server-side update,
E‖∇_{w_s} F_s(w_s) − ∇_{w_s} F(w_s)‖² ≤ κ_1², where F_s is the loss on the update's batch (the buffered
activations, with or without generated ones) and F the loss on the whole data. Lemma 1 says generated
activations make that bound tighter. This meter measures the left-hand side at the server model the update
starts from:

- ∇F_s on the update's batch A_concat (eq. (5)), and on its real activations alone (the batch plain async SFL
  would have used), both at the same w_s, so one run shows what generation changes in that very step;
- a control: ∇ on as many other test rows as the update's batch, drawn afresh each time, through w_c: the
  sampling noise alone of a batch that size, which a larger batch lowers whatever its bias;
- ∇F on a fixed reference sample of the test set passed through the current aggregated client model w_c.
  The GAS code estimates it on 10 fresh test minibatches of 128 (specs/gas.md §10.8) [C]; a fixed sample
  of the same 1280 rows by default [A] takes the sampling noise of the reference out of the comparison over
  time.

The value is the paper's squared norm summed over all server parameters (the code divides it by the number of
parameter tensors, a constant factor) [P]. Every gradient is taken in eval mode and with ``autograd.grad``:
no dropout draw, no batch-norm statistic and no ``.grad`` changes, so measuring leaves the run's numbers as
they are. The sums stay on the server's device and are read once per evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from raysfl.algorithms.common.device import to_device

GRADIENT_ROWS = 256
"""Rows per forward pass of a measured gradient: exact sums up to float rounding, bounded memory."""


def parameter_gradient(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    """∇_w of the mean cross-entropy of ``model(x)`` against ``y``, one tensor per trainable parameter.

    Summed :data:`GRADIENT_ROWS` rows at a time and divided by the row count, so it is the gradient of
    ``F.cross_entropy(model(x), y)`` whatever the size of ``x``. Leaves ``.grad`` untouched.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    total = [torch.zeros_like(p) for p in params]
    for start in range(0, len(y), GRADIENT_ROWS):
        rows = slice(start, start + GRADIENT_ROWS)
        loss = F.cross_entropy(model(x[rows]), y[rows], reduction="sum")
        for acc, g in zip(total, torch.autograd.grad(loss, params), strict=True):
            acc += g
    return [acc / len(y) for acc in total]


def squared_distance(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> torch.Tensor:
    """Σ_i ‖a_i − b_i‖² over paired parameter tensors, as a float64 scalar on their device."""
    total = torch.zeros((), dtype=torch.float64, device=a[0].device)
    for u, v in zip(a, b, strict=True):
        total += (u - v).double().pow(2).sum()
    return total


class GradientDissimilarity:
    """Measures ‖∇F_s(w_s) − ∇F(w_s)‖² every ``every`` server updates; reports the means per evaluation."""

    def __init__(
        self, every: int, samples: int, test_x: torch.Tensor, test_y: torch.Tensor, seed: int
    ) -> None:
        """Draw the reference sample: ``samples`` test rows (all of them if fewer), fixed by ``seed``.

        The other test rows are the pool of the control batches (:meth:`measure`).
        """
        order = torch.randperm(len(test_y), generator=torch.Generator().manual_seed(seed))
        take = min(samples, len(test_y))
        rows = to_device(order[:take].sort().values, test_y.device)
        self.every = every
        self.seed = seed
        self.reference = (test_x[rows], test_y[rows])
        self.test = (test_x, test_y)
        self.pool = order[take:]  # on the CPU: drawing from it reads nothing back from the device
        # update batch, real only, iid control, ‖∇F‖²
        self._sums = torch.zeros(4, dtype=torch.float64, device=test_y.device)
        self._count = 0
        self._control_count = 0
        self._measured = 0  # over the whole run: each control batch's draw is a function of it

    def due(self, update_index: int) -> bool:
        """Whether the server update with this 0-based index is measured (the first one always is)."""
        return update_index % self.every == 0

    def measure(
        self,
        client_model: nn.Module,
        server_model: nn.Module,
        batch: tuple[torch.Tensor, torch.Tensor],
        real: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> None:
        """Add one measurement at the current w_s; ``client_model`` holds w_c.

        ``batch`` is the update's A_concat with its labels; ``real`` its real activations alone, or
        ``None`` when the batch holds no generated ones (the two gradients are then the same). The
        control batch is as many test rows as ``batch`` has, drawn from outside the reference sample
        (fewer if the pool is smaller; none without a pool) and passed through w_c: its distance is the
        sampling noise of a batch that size without any skew of labels or clients, the floor below
        which no batch of that size can go on average.
        """
        modes = (client_model.training, server_model.training)
        client_model.eval()
        server_model.eval()
        try:
            with torch.no_grad():
                features = client_model(self.reference[0])
            g_true = parameter_gradient(server_model, features, self.reference[1])
            g_batch = parameter_gradient(server_model, *batch)
            g_real = g_batch if real is None else parameter_gradient(server_model, *real)
            control = self._control_gradient(client_model, server_model, len(batch[1]))
            self._sums[0] += squared_distance(g_batch, g_true)
            self._sums[1] += squared_distance(g_real, g_true)
            if control is not None:
                self._sums[2] += squared_distance(control, g_true)
            self._sums[3] += sum(g.double().pow(2).sum() for g in g_true)  # ‖∇F‖²
            self._count += 1
            self._control_count += control is not None
            self._measured += 1
        finally:
            client_model.train(modes[0])
            server_model.train(modes[1])

    def _control_gradient(
        self, client_model: nn.Module, server_model: nn.Module, size: int
    ) -> list[torch.Tensor] | None:
        """∇F on ``size`` pool rows drawn afresh for this measurement (None without a pool)."""
        size = min(size, len(self.pool))
        if not size:
            return None
        key = np.random.SeedSequence([self.seed, self._measured]).generate_state(1, np.uint64)[0]
        draw = torch.Generator().manual_seed(int(key))
        rows = to_device(
            self.pool[torch.randperm(len(self.pool), generator=draw)[:size]], self.test[1].device
        )
        with torch.no_grad():
            features = client_model(self.test[0][rows])
        return parameter_gradient(server_model, features, self.test[1][rows])

    def report(self) -> dict[str, float | None]:
        """Means since the last report (None without a measurement), then start the next interval.

        ``grad_dissimilarity``: the update batch's ‖∇F_s − ∇F‖²; ``grad_dissimilarity_real``: the same for
        its real activations alone; ``grad_dissimilarity_iid``: the control batch's (:meth:`measure`);
        ``grad_reference_norm2``: ‖∇F‖², the scale to read them against.
        """
        keys = (
            "grad_dissimilarity",
            "grad_dissimilarity_real",
            "grad_dissimilarity_iid",
            "grad_reference_norm2",
        )
        if not self._count:
            return dict.fromkeys(keys)
        batch, real, control, norm2 = self._sums.tolist()  # the one device read
        means = {
            keys[0]: batch / self._count,
            keys[1]: real / self._count,
            keys[2]: control / self._control_count if self._control_count else None,
            keys[3]: norm2 / self._count,
        }
        self._sums.zero_()
        self._count = self._control_count = 0
        return means
