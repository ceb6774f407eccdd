"""Sampling the per-label Gaussians of GAS §5 without a d×d merge and a Cholesky factorisation per change.

Eq. (12) builds Σ_y from outer products only. Write S for the label's total weight S_N. Unrolling the merge
from a moment F (weight S_F, covariance Σ_F) to now, every factor S_{N-1}/S_N telescopes, so

    S·Σ_y = S_F·Σ_F + Σ_j r_j r_jᵀ + R·I                                                   (★)

where each merge adds the rows r = √S_{N-1}·δ_o, √w_i·(A_i − m_b) (one per activation) and √W_b·δ_b, and
R collects the ridges the code adds at each merge (ρ·S at the moment it is added). With a factor
L Lᵀ = Σ_F + s_F·I taken at F (s_F: the sampler's ridge ρ_s and any jitter), the distribution that
:class:`~raysfl.algorithms.gas.generate.GaussianSampler` draws from, N(μ_y, Σ_y + ρ_s·I), is drawn exactly by

    Â = μ_y + √a·L z₀ + √c·z₁ + Rowsᵀ z₂ / √S,   a = S_F / S,   c = max(0, ρ_s − a·s_F) + R / S,

with z₀, z₁ ∈ N(0, I_d) and z₂ ∈ N(0, I_m), m the number of rows: the three terms are independent, so the
covariance is a·L Lᵀ + c·I + Rowsᵀ Rows / S = Σ_y + ρ_s·I by (★). A merge therefore costs a copy of its
rows instead of eq. (12)'s passes over a d×d matrix, and sampling needs no factor of the current Σ_y.
When the rows of a label would exceed ``capacity`` (d by default: beyond that they cost more per sample
than a factor), the label *folds*: Σ_y is assembled by (★) (one d×d×m product), factorised, and becomes
the new Σ_F; rows and R start again from zero. That is one factorisation per ``capacity`` rows instead of
one per change of Σ_y (per buffer flush, for the reference code's options).

The same Gaussian, other random numbers: the draws differ from the factor-per-change sampler's, and Σ_y
is summed in another order (equal up to rounding), so ``algorithm.params.sampler = "low-rank"`` is an
option whose effect is a different, equally distributed, random stream. Two differences at the edges:
with a jitter (Σ_F + ρ_s·I not positive definite) the variance added is at most the jitter, as in the
factor-per-change sampler; a label whose Σ_y is singular before its first fold (fewer rows than d, no
ridge yet) is sampled from that singular Gaussian, where the factor-per-change sampler adds a jitter.
"""

from __future__ import annotations

import torch

from raysfl import profiling
from raysfl.algorithms.gas.generate import cholesky_with_jitter
from raysfl.algorithms.gas.stats import LabelGaussians


class LowRankSampler:
    """Keeps Σ_y of :class:`LabelGaussians` as (★) and draws from N(μ_y, Σ_y + ridge·I) (module docstring).

    A drop-in for ``GaussianSampler``. Attaching it (the constructor does) makes it the owner of the
    statistics' covariances: :meth:`LabelGaussians.update` applies eq. (11) and hands every eq. (12) merge
    to :meth:`merge`, and ``add_ridge`` to :meth:`add_ridge`; ``stats.cov[y]`` is Σ_F, Σ_y as of the label's
    last fold. Everything per label and large (rows, factor) lives on the statistics' device in their dtype;
    weights, row counts and ridge masses are CPU numbers, so deciding when to fold reads nothing from the
    device.
    """

    def __init__(self, stats: LabelGaussians, ridge: float, capacity: int = 0, max_tries: int = 12) -> None:
        if stats.covariance != "full":
            raise ValueError("the low-rank sampler needs full covariances (covariance = 'full')")
        if bool((stats.weight > 0).any()):
            raise ValueError("attach the low-rank sampler before the first merge")
        m = stats.num_labels
        self.stats = stats
        self.ridge = ridge
        self.capacity = capacity or stats.dim
        self.max_tries = max_tries
        self.rows: list[torch.Tensor | None] = [None] * m  # (≤ capacity, d) buffers, grown on demand
        self.count = [0] * m  # rows in use
        self.factor: list[torch.Tensor | None] = [None] * m  # L, L Lᵀ = Σ_F + s_F·I
        self.fold_weight = [0.0] * m  # S_F
        self.fold_shift = [0.0] * m  # s_F
        self.ridge_mass = [0.0] * m  # R
        self.folds = 0
        stats.low_rank = self

    # --- eq. (12), handed over by LabelGaussians ----------------------------------------------------------
    def merge(
        self,
        y: int,
        centred: torch.Tensor,
        w: torch.Tensor,
        s_old: float,
        d_old: torch.Tensor,
        wb: float,
        d_b: torch.Tensor,
    ) -> None:
        """One eq. (12) merge of label ``y`` as its rows of (★); S_y is already the new weight.

        ``centred`` holds A_i − m_b and ``w`` the weights w_i (device); ``s_old`` = S_{N-1} and ``wb`` = W_b
        (CPU numbers); ``d_old`` = δ_o and ``d_b`` = δ_b.
        """
        parts = [w.sqrt()[:, None] * centred]
        if s_old > 0:  # δ_o and δ_b vanish on a label's first merge (μ_N = m_b)
            parts.append((s_old**0.5 * d_old)[None])
            parts.append((wb**0.5 * d_b)[None])
        new = torch.cat(parts).to(self.stats.dtype)
        n = self.count[y]
        if n + len(new) > self.capacity:
            self._fold(y, new)
            return
        buf = self._room(y, n + len(new))
        buf[n : n + len(new)] = new
        self.count[y] = n + len(new)

    def _room(self, y: int, rows: int) -> torch.Tensor:
        """Label ``y``'s row buffer with room for ``rows`` rows: grown by doubling, at most ``capacity``.

        A buffer holds at most twice the rows in use, or 64 (memory and checkpoints; a fold releases it),
        and the copies of its growth add up to less than one pass over its final size.
        """
        buf = self.rows[y]
        if buf is not None and len(buf) >= rows:
            return buf
        size = min(self.capacity, max(rows, 2 * (0 if buf is None else len(buf)), 64))
        grown = torch.zeros(size, self.stats.dim, dtype=self.stats.dtype, device=self.stats.device)
        if buf is not None:
            grown[: self.count[y]] = buf[: self.count[y]]
        self.rows[y] = grown
        return grown

    def add_ridge(self, y: int, ridge: float) -> None:
        """``ridge·I`` added to Σ_y at the current weight S: R += ridge·S in (★)."""
        self.ridge_mass[y] += ridge * float(self.stats.weight[y])

    def _fold(self, y: int, extra: torch.Tensor) -> None:
        """Σ_y by (★) with the rows and ``extra`` into ``stats.cov[y]``; factorise it; rows and R restart."""
        s = float(self.stats.weight[y])
        cov = self.stats.cov[y]
        with profiling.section("server.stats"):
            cov.mul_(self.fold_weight[y] / s)
            n, rows = self.count[y], self.rows[y]
            if n and rows is not None:
                cov.addmm_(rows[:n].T, rows[:n], alpha=1 / s)
            cov.addmm_(extra.T, extra, alpha=1 / s)
            cov.diagonal().add_(self.ridge_mass[y] / s)
        with profiling.section("server.cholesky"):
            L, jitter = cholesky_with_jitter(cov, self.ridge, self.max_tries)
        self.factor[y] = L
        self.fold_weight[y] = s
        self.fold_shift[y] = self.ridge + jitter
        self.ridge_mass[y] = 0.0
        self.count[y] = 0
        self.rows[y] = None  # regrown from 64 rows: a buffer never holds more than twice its rows in use
        self.folds += 1

    # --- sampling ---------------------------------------------------------------------------------------
    def covariance(self, y: int) -> torch.Tensor:
        """Σ_y by (★), float64: (S_F·Σ_F + Rowsᵀ Rows + R·I) / S (what :meth:`sample` draws, less ridge·I)."""
        s = float(self.stats.weight[y])
        out = self._add_rows_term(self.stats.cov[y].double() * (self.fold_weight[y] / s), y, s)
        out.diagonal().add_(self.ridge_mass[y] / s)
        return out

    def sample_covariance(self, y: int) -> torch.Tensor:
        """The covariance :meth:`sample` draws label ``y`` from, a·L Lᵀ + c·I + Rowsᵀ Rows / S, float64."""
        a, c, s = self._coefficients(y)
        out = torch.eye(self.stats.dim, dtype=torch.float64, device=self.stats.device) * c
        L = self.factor[y]
        if L is not None:
            out += a * (L.double() @ L.double().T)
        return self._add_rows_term(out, y, s)

    def _add_rows_term(self, out: torch.Tensor, y: int, s: float) -> torch.Tensor:
        """``out`` += Rowsᵀ Rows / S of label ``y`` (float64, in place; nothing to add without rows)."""
        n, rows = self.count[y], self.rows[y]
        if n and rows is not None:
            out += rows[:n].double().T @ rows[:n].double() / s
        return out

    def _coefficients(self, y: int) -> tuple[float, float, float]:
        """(a, c, S) of the module docstring: a = S_F / S, c = max(0, ridge − a·s_F) + R / S."""
        s = float(self.stats.weight[y])
        a = self.fold_weight[y] / s if self.factor[y] is not None else 0.0
        c = max(0.0, self.ridge - a * self.fold_shift[y]) + self.ridge_mass[y] / s
        return a, c, s

    def sample(self, counts: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample ``counts[y]`` activations of each label y; returns (Â (B̂, d) float32, Ŷ (B̂,)), by label.

        Per label, in this order: z₀ (k×d) when the label has a factor, z₁ (k×d) when c > 0, z₂ (k×m)
        when it has rows. ``counts`` is a CPU tensor; ``gen`` a generator on the statistics' device.
        """
        device, dtype, d = self.stats.device, self.stats.dtype, self.stats.dim
        chunks, labels = [], []
        for y, k in enumerate(counts.tolist()):
            if k == 0:
                continue
            a, c, s = self._coefficients(y)
            x = self.stats.mean[y].to(dtype).expand(k, d).clone()
            L = self.factor[y]
            if L is not None:
                z0 = torch.randn(k, d, generator=gen, dtype=dtype, device=device)
                x.add_(z0 @ L.T, alpha=a**0.5)
            if c > 0:
                z1 = torch.randn(k, d, generator=gen, dtype=dtype, device=device)
                x.add_(z1, alpha=c**0.5)
            n, rows = self.count[y], self.rows[y]
            if n and rows is not None:
                z2 = torch.randn(k, n, generator=gen, dtype=dtype, device=device)
                x.add_(z2 @ rows[:n], alpha=s**-0.5)
            chunks.append(x.to(torch.float32))
            labels.append(torch.full((k,), y, dtype=torch.int64, device=device))
        if not chunks:
            return torch.zeros(0, d, device=device), torch.zeros(0, dtype=torch.int64, device=device)
        return torch.cat(chunks), torch.cat(labels)


__all__ = ["LowRankSampler"]
