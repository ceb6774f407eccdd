"""The low-rank sampler (``algorithm.params.sampler = "low-rank"``): the same Σ_y as eq. (12), the same
Gaussian as the factor-per-change sampler, folds when the hand count says, a clear error off its domain."""

from __future__ import annotations

import pytest
import torch

from raysfl.algorithms.gas.generate import GaussianSampler
from raysfl.algorithms.gas.lowrank import LowRankSampler
from raysfl.algorithms.gas.params import GASParams
from raysfl.algorithms.gas.stats import LabelGaussians
from raysfl.config import ConfigError, build

F64 = torch.float64


def stream(steps: int, d: int, labels: int, seed: int = 0):
    """Batches of activations, labels and growing staleness weights s(n) = n, as a server receives them."""
    g = torch.Generator().manual_seed(seed)
    for i in range(steps):
        n = 5 + i % 4
        x = torch.randn(n, d, generator=g, dtype=F64) * (1 + torch.arange(d, dtype=F64)) + 3.0
        yield x, torch.randint(0, labels, (n,), generator=g), torch.full((n,), float(i + 1), dtype=F64)


@pytest.mark.parametrize("per_flush_ridge", [0.0, 1e-4])
def test_the_rows_and_folds_hold_exactly_the_covariance_of_eq12(per_flush_ridge):
    """(★): S_F·Σ_F + Σ r rᵀ + R·I over S equals the eq. (12) recursion, before and after folds, with the
    code's per-merge ridge; the sampled covariance is that plus the sampler's ridge."""
    d, m, ridge = 6, 3, 1e-3
    exact = LabelGaussians(m, d, "full", F64)
    held = LabelGaussians(m, d, "full", F64)
    sampler = LowRankSampler(held, ridge=ridge, capacity=12)
    for x, y, w in stream(30, d, m):
        merged = [k for k in torch.unique(y).tolist() if exact.has(k)]
        for stats in (exact, held):
            stats.update(x, y, w)
            stats.add_ridge(merged, per_flush_ridge)
        for k in range(m):
            if exact.has(k):
                assert torch.allclose(sampler.covariance(k), exact.cov[k], rtol=0, atol=1e-10)
                target = exact.cov[k] + ridge * torch.eye(d, dtype=F64)
                assert torch.allclose(sampler.sample_covariance(k), target, rtol=0, atol=1e-10)
                assert torch.equal(held.mean[k], exact.mean[k]) and torch.equal(held.weight, exact.weight)
    assert sampler.folds >= 2 * m  # every label folded, some twice: both terms of (★) were exercised
    assert any(n > 0 for n in sampler.count)


def test_row_buffers_grow_by_doubling_up_to_the_capacity():
    stats = LabelGaussians(1, 3, "full", F64)
    sampler = LowRankSampler(stats, ridge=0.0, capacity=300)
    sizes = []
    for x, _, w in stream(40, 3, 1):
        stats.update(x, torch.zeros(len(x), dtype=torch.long), w)
        buf = sampler.rows[0]
        sizes.append(0 if buf is None else len(buf))
        assert sampler.count[0] <= sizes[-1] <= max(64, 2 * sampler.count[0])
    assert sampler.folds == 1 and 300 in sizes  # the last growth stops at the capacity, the fold releases it
    assert sizes[: sizes.index(300) + 1] == sorted(sizes[: sizes.index(300) + 1])


def test_a_label_folds_when_its_rows_would_exceed_the_capacity():
    """Rows per merge, by hand: n activations on a label's first merge, n + 2 (δ_o, δ_b) afterwards."""
    stats = LabelGaussians(1, 3, "full", F64)
    sampler = LowRankSampler(stats, ridge=0.0, capacity=10)
    g = torch.Generator().manual_seed(1)

    def merge(n: int) -> None:
        x = torch.randn(n, 3, generator=g, dtype=F64)
        stats.update(x, torch.zeros(n, dtype=torch.long), torch.ones(n))

    merge(4)
    assert (sampler.count[0], sampler.folds) == (4, 0)
    merge(4)  # 4 + 2 rows: exactly full
    assert (sampler.count[0], sampler.folds) == (10, 0) and sampler.factor[0] is None
    merge(1)  # 3 more rows would make 13 > 10: fold, the rows start again
    assert (sampler.count[0], sampler.folds) == (0, 1) and sampler.factor[0] is not None
    assert sampler.fold_weight[0] == 9.0
    merge(2)
    assert (sampler.count[0], sampler.folds) == (4, 1)
    L = sampler.factor[0]
    assert torch.allclose(L @ L.T, stats.cov[0])  # Σ_F: the covariance of the first 9 activations


@pytest.mark.parametrize("capacity", [400, 10])  # rows only / a factor plus rows
def test_samples_have_the_tracked_mean_and_covariance(capacity):
    g = torch.Generator().manual_seed(0)
    a = torch.tensor([[2.0, 0.0], [1.2, 0.5]], dtype=F64)
    stats = LabelGaussians(1, 2, "full", F64)
    sampler = LowRankSampler(stats, ridge=0.01, capacity=capacity)
    for _ in range(50):
        x = torch.randn(6, 2, generator=g, dtype=F64) @ a.T + torch.tensor([1.0, -3.0], dtype=F64)
        stats.update(x, torch.zeros(6, dtype=torch.long), torch.ones(6, dtype=F64))
    assert (sampler.factor[0] is None) == (capacity == 400)
    xs, ys = sampler.sample(torch.tensor([40000]), torch.Generator().manual_seed(1))
    assert xs.shape == (40000, 2) and xs.dtype == torch.float32 and (ys == 0).all()
    target = sampler.covariance(0) + 0.01 * torch.eye(2, dtype=F64)
    assert torch.allclose(xs.double().mean(0), stats.mean[0], atol=0.03)
    assert torch.allclose(torch.cov(xs.double().T), target, atol=0.06)


def test_same_generator_same_draws_and_other_draws_than_the_cholesky_sampler():
    """The stated effect of the option: the same Gaussian drawn with other random numbers."""
    runs = []
    for kind in ("low-rank", "low-rank", "cholesky"):
        stats = LabelGaussians(2, 4, "full", torch.float32)
        if kind == "low-rank":
            sampler = LowRankSampler(stats, 1e-3, capacity=8)
        else:
            sampler = GaussianSampler(stats, 1e-3)
        for x, y, w in stream(6, 4, 2):
            stats.update(x, y, w)
        runs.append(sampler.sample(torch.tensor([3, 5]), torch.Generator().manual_seed(7)))
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[2][1])
    assert not torch.allclose(runs[0][0], runs[2][0])


def test_the_sampler_refuses_diagonal_covariances_and_late_attachment():
    with pytest.raises(ValueError, match="full covariances"):
        LowRankSampler(LabelGaussians(2, 3, "diagonal"), 0.0)
    stats = LabelGaussians(2, 3, "full")
    stats.update(torch.ones(2, 3), torch.zeros(2, dtype=torch.long), torch.ones(2))
    with pytest.raises(ValueError, match="before the first merge"):
        LowRankSampler(stats, 0.0)


def test_the_option_names_the_field_and_its_alternatives():
    assert GASParams().sampler == "cholesky"
    with pytest.raises(ConfigError, match="sampler = 'low-rank' draws from full covariances"):
        build(GASParams, {"sampler": "low-rank", "covariance": "diagonal"}, "algorithm.params")
    with pytest.raises(ConfigError, match="algorithm.params.sampler"):
        build(GASParams, {"sampler": "lowrank"}, "algorithm.params")
