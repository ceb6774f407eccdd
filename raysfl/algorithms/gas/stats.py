"""Per-label Gaussian statistics of activations with staleness-aware weights (GAS §5, eqs. (11)-(12)).

For each label y the server keeps the weighted mean μ_y, the weighted covariance Σ_y (full d×d or its
diagonal) and the total weight S_y = Σ s(n(A)). A batch of activations that share one weight is merged
with the exact two-group formula, which equals applying eqs. (11)-(12) once per activation (App. B):

    S_N = S_{N-1} + W_b
    μ_N = (S_{N-1} μ_{N-1} + W_b m_b) / S_N                                       (11)
    Σ_N = [S_{N-1}(Σ_{N-1} + δ_o δ_oᵀ) + W_b(Σ_b + δ_b δ_bᵀ)] / S_N               (12)

with δ_o = μ_N − μ_{N-1}, δ_b = μ_N − m_b, and m_b, Σ_b the (weighted) mean and biased covariance of the
batch. A single activation is the special case W_b = s(n(A)), m_b = A, Σ_b = 0, which is eq. (12) verbatim.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from raysfl.algorithms.common.device import to_device
from raysfl.config import ConfigError

if TYPE_CHECKING:
    from raysfl.algorithms.gas.lowrank import LowRankSampler


@dataclass
class LabelGaussians:
    """Running weighted mean and covariance of activations, one Gaussian per label.

    ``dtype`` float64 makes the incremental rule match the direct weighted formulas to ~1e-12; float32
    halves the memory of full covariances (M·d² numbers: 0.4 GB for d = 3136, M = 10).
    ``covariance="diagonal"`` keeps only the variances (d numbers instead of d² per label).
    With a :class:`~raysfl.algorithms.gas.lowrank.LowRankSampler` attached (``low_rank``), the sampler
    keeps eq. (12) as rows and ``cov`` is Σ_y as of the sampler's last fold of each label; the current
    Σ_y is ``low_rank.covariance(y)``.

    Placement: the means and covariances (the large part) live on ``device``, the server's; the weights S_y
    and the version counters (M numbers each) stay on the CPU with the labels and the activation weights
    passed to :meth:`update`, so every decision that depends on them (which labels to merge, which factors
    are stale, how many activations to generate) is taken without reading the device.
    """

    num_labels: int
    dim: int
    covariance: str = "full"
    dtype: torch.dtype = torch.float64
    device: torch.device | str = "cpu"
    weight: torch.Tensor = field(init=False)  # S_y, shape (M,)
    mean: torch.Tensor = field(init=False)  # μ_y, shape (M, d)
    cov: torch.Tensor = field(init=False)  # Σ_y, shape (M, d, d) or (M, d) for diagonal
    version: torch.Tensor = field(init=False)  # bumps when a label's statistics change, shape (M,)
    # when set, owns Σ_y: merges and ridges go to it as rows, and ``cov`` holds Σ_y as of its last fold
    low_rank: LowRankSampler | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.covariance not in ("full", "diagonal"):
            raise ValueError(f"covariance must be 'full' or 'diagonal', got {self.covariance!r}")
        m, d = self.num_labels, self.dim
        self.device = torch.device(self.device)
        self.weight = torch.zeros(m, dtype=torch.float64)
        self.mean = torch.zeros(m, d, dtype=torch.float64, device=self.device)
        shape = (m, d, d) if self.covariance == "full" else (m, d)
        self.cov = torch.zeros(shape, dtype=self.dtype, device=self.device)
        self.version = torch.zeros(m, dtype=torch.int64)

    def has(self, label: int) -> bool:
        """Whether label ``label`` has received any activation."""
        return bool(self.weight[label] > 0)

    def update(self, acts: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor) -> None:
        """Merge activations (N, d), their labels (N,) and per-activation weights s(n(A)) (N,).

        Implements eqs. (11)-(12) exactly, grouped by label (activations of one label are merged as one
        weighted group, which is algebraically identical to the per-activation recursion). ``acts`` is on
        :attr:`device`; ``labels`` and ``weights`` are read on the CPU (they are moved there if they are
        not, which a GPU server avoids by passing the CPU copies it keeps).
        """
        x = acts.detach().reshape(acts.shape[0], -1).to(self.dtype)
        labels = labels.cpu()
        w_cpu = weights.detach().cpu().to(self.dtype)
        w = to_device(w_cpu, x.device)
        small = self.covariance == "diagonal" and self.low_rank is None and x.device.type == "cpu"
        with one_cpu_thread() if small else nullcontext():
            for y in torch.unique(labels).tolist():
                rows = torch.nonzero(labels == y).squeeze(1)
                rows_on_device = to_device(rows, x.device)
                self._merge(
                    int(y),
                    x.index_select(0, rows_on_device),
                    w.index_select(0, rows_on_device),
                    w_cpu.index_select(0, rows).sum(),
                )

    def _merge(self, y: int, x: torch.Tensor, w: torch.Tensor, wb: torch.Tensor) -> None:
        """Merge label ``y``'s group: activations ``x`` and weights ``w`` (device), ``wb = w.sum()`` (CPU)."""
        if wb <= 0:
            return
        mb = (w[:, None] * x).sum(0) / wb
        xc = x - mb
        s_old = self.weight[y].to(self.dtype)  # (a view of weight[y] when dtype is float64)
        s_new = s_old + wb
        if not float(s_new) <= torch.finfo(self.dtype).max:
            raise weight_overflow(y, float(s_new), self.dtype)
        s_old_value = float(s_old)  # read before weight[y] is overwritten
        mu_old = self.mean[y].to(self.dtype)
        mu = (s_old * mu_old + wb * mb) / s_new
        d_old, d_b = mu - mu_old, mu - mb
        if self.low_rank is not None:
            pass  # Σ_y's part of eq. (12) is the low-rank sampler's, below, once S_y is the new one
        elif self.covariance == "full":
            _merge_full(self.cov[y], (w[:, None] * xc).T @ xc, wb, s_old, s_new, d_old, d_b)
        else:
            var_b = (w[:, None] * xc * xc).sum(0) / wb
            self.cov[y] = (s_old * (self.cov[y] + d_old * d_old) + wb * (var_b + d_b * d_b)) / s_new
        self.mean[y] = mu.to(torch.float64)
        self.weight[y] = s_new.to(torch.float64)
        self.version[y] += 1
        if self.low_rank is not None:
            self.low_rank.merge(y, xc, w, s_old_value, d_old, float(wb), d_b)

    def add_ridge(self, labels: list[int], ridge: float) -> None:
        """Add ``ridge·I`` to the covariance of ``labels`` (the reference code does this per merge [C])."""
        for y in labels:
            if self.low_rank is not None:
                self.low_rank.add_ridge(y, ridge)
            elif self.covariance == "full":
                self.cov[y].diagonal().add_(ridge)
            else:
                self.cov[y].add_(ridge)


def weight_overflow(label: int, total: float, dtype: torch.dtype) -> ConfigError:
    """The error for a total weight S_y beyond ``dtype``: the statistics would turn into inf and NaN.

    s(n) grows without bound in n; a fast-growing one (exponential, a large polynomial exponent) passes the
    largest ``dtype`` number within a run (float32 holds up to about e^88.7, the full covariances' type;
    float64 up to e^709.8).
    """
    return ConfigError(
        [
            f"algorithm.params.weighting: the total weight S_y of label {label} reached {total:.3g}, beyond "
            f"the {str(dtype).removeprefix('torch.')} statistics (at most {torch.finfo(dtype).max:.3g}), so "
            "eqs. (11)-(12) would give inf and NaN; lower algorithm.params.weight_b or weight_a, or use "
            "weighting = 'linear' (the paper's)"
        ]
    )


@contextmanager
def one_cpu_thread() -> Iterator[None]:
    """Run the enclosed CPU ops on one torch thread, then restore the thread count.

    For the diagonal merge: a few dozen elementwise ops and column sums on (n, d) tensors per label, each
    too small to gain from a second thread, whose wake-up then costs more than it saves; on a core shared
    with a client pool (Ray on 2 cores) each op waits for that core. Each of these ops computes every output
    element on one thread whatever the count, so the results are the same bits
    (``tests/unit/algorithms/test_gas_stats_inplace.py``).
    """
    before = torch.get_num_threads()
    if before == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


MERGE_ROWS = 64  # rows of Σ per block of the in-place merge (32-128 timed alike at d = 3136, 2 threads)


def _merge_full(
    cov: torch.Tensor,
    cov_b: torch.Tensor,
    wb: torch.Tensor,
    s_old: torch.Tensor,
    s_new: torch.Tensor,
    d_old: torch.Tensor,
    d_b: torch.Tensor,
) -> None:
    """Eq. (12) for a full covariance, in place:  Σ ← (S_{N-1}(Σ + δ_o δ_oᵀ) + W_b(Σ_b + δ_b δ_bᵀ)) / S_N.

    ``cov_b`` holds W_b·Σ_b (the weighted scatter of the batch) and is overwritten. Every element goes
    through the same elementwise operations in the same order as the expression, so the result has the
    same bits, but without its six d×d temporaries and block by block: the eight passes over each
    block of rows run while the block is in cache instead of eight passes over 2·d² numbers in memory
    (for d = 3136: 20-25 ms instead of 40-45 ms a label on 2 cores).
    """
    d = cov.shape[0]
    for r0 in range(0, d, MERGE_ROWS):
        r1 = min(r0 + MERGE_ROWS, d)
        block_b = cov_b[r0:r1]
        block_b.div_(wb).add_(torch.outer(d_b[r0:r1], d_b)).mul_(wb)
        cov[r0:r1].add_(torch.outer(d_old[r0:r1], d_old)).mul_(s_old).add_(block_b).div_(s_new)


def weighted_moments(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Direct weighted mean and biased covariance, μ = Σ w A / S and Σ = Σ w (A − μ)(A − μ)ᵀ / S (GAS §5)."""
    x = x.to(torch.float64)
    w = w.to(torch.float64)
    s = w.sum()
    mu = (w[:, None] * x).sum(0) / s
    xc = x - mu
    return mu, (w[:, None] * xc).T @ xc / s
