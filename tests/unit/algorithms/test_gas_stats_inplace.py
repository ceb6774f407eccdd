"""The in-place covariance merge of LabelGaussians equals eq. (12) written as one expression, bit for bit."""

from __future__ import annotations

import pytest
import torch

from raysfl.algorithms.gas.stats import LabelGaussians


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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_in_place_merge_is_bitwise_the_expression(dtype):
    gen = torch.Generator().manual_seed(4)
    d = 64
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
