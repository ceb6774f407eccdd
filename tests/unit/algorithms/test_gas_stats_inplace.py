"""The in-place covariance merge of LabelGaussians equals eq. (12) written as one expression, bit for bit;
so does the sampler's Σ + shift·I without the identity matrix."""

from __future__ import annotations

import pytest
import torch

from raysfl.algorithms.gas.generate import shifted
from raysfl.algorithms.gas.stats import MERGE_ROWS, LabelGaussians


def expression_merge(
    cov: torch.Tensor, mean: torch.Tensor, s: torch.Tensor, x: torch.Tensor, w: torch.Tensor
):
    """Eq. (11)-(12) for one label as the expression the in-place code replaced (same dtype handling)."""
    wb = w.sum()
    mb = (w[:, None] * x).sum(0) / wb
    xc = x - mb
    s_new = s + wb
    mu = (s * mean + wb * mb) / s_new
    d_old, d_b = mu - mean, mu - mb
    cov_b = (w[:, None] * xc).T @ xc / wb
    cov = (s * (cov + torch.outer(d_old, d_old)) + wb * (cov_b + torch.outer(d_b, d_b))) / s_new
    return cov, mu, s_new


@pytest.mark.parametrize("d", [64, 3 * MERGE_ROWS + 7])  # one block; several blocks and a short last one
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_in_place_merge_is_bitwise_the_expression(dtype, d):
    gen = torch.Generator().manual_seed(4)
    stats = LabelGaussians(1, d, "full", dtype)
    cov = torch.zeros(d, d, dtype=dtype)
    mean = torch.zeros(d, dtype=dtype)
    s = torch.zeros((), dtype=dtype)
    for step in range(5):
        x = (torch.rand(12, d, generator=gen) * 3).to(dtype)
        w = torch.full((12,), float(step + 2), dtype=torch.float64)
        stats.update(x, torch.zeros(12, dtype=torch.int64), w)
        cov, mean, s = expression_merge(cov, mean, s, x, w.to(dtype))
        mean = mean.to(torch.float64).to(dtype)  # the class keeps μ in float64
        assert torch.equal(stats.cov[0], cov)
        assert torch.equal(stats.mean[0].to(dtype), mean)


@pytest.mark.parametrize("shift", [0.0, 1e-5, 0.25])
def test_shift_without_identity_is_the_expression(shift):
    gen = torch.Generator().manual_seed(7)
    a = torch.randn(40, 90, generator=gen)
    cov = a.T @ a / 40 + 1e-3 * torch.eye(90)
    expected = cov + shift * torch.eye(90)
    got = shifted(cov, shift)
    assert torch.equal(got, expected)
    assert torch.equal(torch.linalg.cholesky(got), torch.linalg.cholesky(expected))
    assert (got is cov) == (shift == 0.0)  # no copy without a shift; the statistics are never modified
    assert torch.equal(cov, a.T @ a / 40 + 1e-3 * torch.eye(90))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_diagonal_merge_on_one_thread_gives_the_two_thread_bits(dtype, monkeypatch):
    """The diagonal statistics merge on one torch thread (``one_cpu_thread``); at GAS's d = 3136 and batches
    of 32, its ops are large enough for torch to split them over two threads, and the results are the same
    bits either way. The caller's thread count is restored."""
    import raysfl.algorithms.gas.stats as stats_module

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    seen = []
    merge = stats_module.LabelGaussians._merge
    monkeypatch.setattr(
        stats_module.LabelGaussians,
        "_merge",
        lambda self, *a: seen.append(torch.get_num_threads()) or merge(self, *a),
    )
    try:
        runs = []
        for one_thread in (True, False):
            seen.clear()
            if not one_thread:
                monkeypatch.setattr(stats_module, "one_cpu_thread", stats_module.nullcontext)
            gen = torch.Generator().manual_seed(8)
            stats = LabelGaussians(10, 3136, "diagonal", dtype)
            for _ in range(6):
                x = torch.randn(32, 64, 7, 7, generator=gen).relu()
                y = torch.randint(0, 10, (32,), generator=gen)
                stats.update(x, y, torch.rand(32, generator=gen, dtype=torch.float64))
                assert torch.get_num_threads() == 2
            assert set(seen) == ({1} if one_thread else {2})
            runs.append(stats)
        assert torch.equal(runs[0].mean, runs[1].mean) and torch.equal(runs[0].cov, runs[1].cov)
        assert torch.equal(runs[0].weight, runs[1].weight)
    finally:
        torch.set_num_threads(threads)
