"""GAS equations against direct computations and hand-computed values (specs/gas.md §5, eq. (6))."""

import math

import pytest
import torch
import torch.nn.functional as F

from raysfl.algorithms.gas.generate import (
    GaussianSampler,
    generation_counts,
    log_prior,
    staleness_weight,
)
from raysfl.algorithms.gas.stats import LabelGaussians, weighted_moments


def _stream(n=60, d=5, m=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64) * 2 + 1
    y = torch.randint(0, m, (n,), generator=g)
    w = torch.rand(n, generator=g, dtype=torch.float64) * 5 + 0.1
    return x, y, w


@pytest.mark.parametrize("covariance", ["full", "diagonal"])
def test_incremental_update_equals_direct_weighted_moments(covariance):
    """Eqs. (11)-(12) applied one activation at a time == μ_N, Σ_N of §5 computed directly."""
    x, y, w = _stream()
    stats = LabelGaussians(3, 5, covariance)
    for i in range(len(y)):
        stats.update(x[i : i + 1], y[i : i + 1], w[i : i + 1])
    for label in range(3):
        sel = y == label
        mu, cov = weighted_moments(x[sel], w[sel])
        assert torch.allclose(stats.mean[label], mu, atol=1e-12)
        expected = cov if covariance == "full" else cov.diagonal()
        assert torch.allclose(stats.cov[label], expected, atol=1e-12)
        assert stats.weight[label].item() == pytest.approx(w[sel].sum().item())


def test_batched_update_equals_per_activation_update():
    """Merging a batch at once (the code's per-flush form) == the per-activation recursion."""
    x, y, w = _stream(seed=1)
    one = LabelGaussians(3, 5)
    many = LabelGaussians(3, 5)
    one.update(x, y, w)
    for i in range(0, len(y), 7):
        many.update(x[i : i + 7], y[i : i + 7], w[i : i + 7])
    assert torch.allclose(one.mean, many.mean, atol=1e-12)
    assert torch.allclose(one.cov, many.cov, atol=1e-12)


def test_eq12_single_activation_by_hand():
    """Two scalar activations: μ and σ² of the weighted pair, worked by hand."""
    stats = LabelGaussians(1, 1)
    stats.update(torch.tensor([[2.0]]), torch.tensor([0]), torch.tensor([1.0]))
    stats.update(torch.tensor([[5.0]]), torch.tensor([0]), torch.tensor([2.0]))
    # μ = (1·2 + 2·5)/3 = 4; Σ = (1·(2−4)² + 2·(5−4)²)/3 = 6/3 = 2
    assert stats.mean[0, 0].item() == pytest.approx(4.0)
    assert stats.cov[0, 0, 0].item() == pytest.approx(2.0)


def test_staleness_weights():
    assert staleness_weight(7, "linear").item() == 7
    assert staleness_weight(3, "polynomial", a=2, b=2).item() == 18
    assert staleness_weight(1, "exponential", a=1, b=1).item() == pytest.approx(math.e)
    with pytest.raises(ValueError, match="weighting"):
        staleness_weight(1, "cubic")


def test_generation_counts_top_up_matches_reference_rule():
    """[C] top up every label to ≥ B; B̂ = Σ max(0, B − n_y) (specs/gas.md §10.5)."""
    real = torch.tensor([40, 10, 0, 32])
    avail = torch.tensor([True, True, True, True])
    counts = generation_counts(real, avail, "top-up", 32)
    assert counts.tolist() == [0, 22, 32, 0]
    assert int(counts.sum()) == 0 + 22 + 32 + 0  # B̂ = Σ max(0, B − n_y)


def test_generation_counts_equal_balances_labels():
    """[P] every label with statistics ends with the count of the most frequent one."""
    real = torch.tensor([40, 10, 0, 5])
    avail = torch.tensor([True, True, True, False])
    counts = generation_counts(real, avail, "equal", 32)
    assert counts.tolist() == [0, 30, 40, 0]
    assert ((real + counts)[avail] == 40).all()


def test_sampler_reproduces_the_gaussian():
    """Generated activations have the tracked mean and covariance (full and diagonal)."""
    g = torch.Generator().manual_seed(0)
    a = torch.tensor([[2.0, 0.0], [1.2, 0.5]], dtype=torch.float64)
    x = torch.randn(4000, 2, generator=g, dtype=torch.float64) @ a.T + torch.tensor(
        [1.0, -3.0], dtype=torch.float64
    )
    for cov in ("full", "diagonal"):
        stats = LabelGaussians(1, 2, cov)
        stats.update(x, torch.zeros(4000, dtype=torch.long), torch.ones(4000, dtype=torch.float64))
        xs, ys = GaussianSampler(stats, ridge=0.0).sample(
            torch.tensor([20000]), torch.Generator().manual_seed(1)
        )
        assert xs.shape == (20000, 2) and (ys == 0).all()
        assert torch.allclose(xs.mean(0).double(), stats.mean[0], atol=0.05)
        emp = torch.cov(xs.double().T)
        target = stats.cov[0] if cov == "full" else torch.diag(stats.cov[0])
        tol = 0.12 if cov == "full" else 0.12
        assert torch.allclose(emp if cov == "full" else torch.diag(emp.diagonal()), target, atol=tol)


def test_sampler_falls_back_on_singular_covariance():
    """A rank-deficient Σ (one activation seen) still samples: ε·I is added until Cholesky succeeds."""
    stats = LabelGaussians(1, 3, "full")
    stats.update(torch.ones(1, 3, dtype=torch.float64), torch.zeros(1, dtype=torch.long), torch.ones(1))
    xs, _ = GaussianSampler(stats, ridge=0.0).sample(torch.tensor([5]), torch.Generator().manual_seed(0))
    assert torch.isfinite(xs).all() and torch.allclose(xs, torch.ones(5, 3), atol=1e-2)


def test_logit_adjusted_gradient_by_hand():
    """Eq. (6)-(7): CE on s + log P_k gives ∂l/∂s = softmax(s + log P_k) − onehot(y)."""
    hist = torch.tensor([3, 1, 0])
    prior = log_prior(hist)
    assert prior[0].item() == pytest.approx(math.log(0.75), abs=1e-6)
    assert prior[2].item() == pytest.approx(math.log(1e-12), rel=1e-6)  # absent class: log(1e-12) [C]
    s = torch.tensor([[0.2, 0.5, -1.0]], requires_grad=True)
    F.cross_entropy(s + prior, torch.tensor([1])).backward()
    z = torch.tensor([0.2 + math.log(0.75), 0.5 + math.log(0.25), -1.0 + math.log(1e-12)])
    p = torch.exp(z) / torch.exp(z).sum()
    assert torch.allclose(s.grad[0], p - torch.tensor([0.0, 1.0, 0.0]), atol=1e-6)


@pytest.mark.parametrize(("covariance", "dtype"), [("full", torch.float32), ("diagonal", torch.float64)])
def test_a_total_weight_beyond_the_statistics_type_stops_with_the_option_named(covariance, dtype):
    """s(n) = e^n passes float32 at n ≈ 88.7: the merge used to give inf and NaN means silently."""
    from raysfl.config import ConfigError

    stats = LabelGaussians(2, 3, covariance, dtype)
    big = math.exp(80.0) if dtype == torch.float32 else math.exp(700.0)
    stats.update(torch.ones(2, 3), torch.tensor([0, 0]), torch.full((2,), big, dtype=torch.float64))
    assert torch.isfinite(stats.mean).all() and stats.weight[0] == pytest.approx(2 * big)
    with pytest.raises(ConfigError, match=r"algorithm.params.weighting: the total weight S_y of label 0"):
        stats.update(torch.ones(1, 3), torch.tensor([0]), torch.full((1,), big * 1e10, dtype=torch.float64))
    assert torch.isfinite(stats.mean).all()  # nothing was merged


def test_an_exponential_weight_that_cannot_fit_is_refused_at_load_time():
    from raysfl.config import ConfigError
    from raysfl.scenario import scenario_from_dict

    doc = {
        "train": {"global_iterations": 5, "local_iterations": 20},
        "algorithm": {"name": "gas", "params": {"weighting": "exponential"}},
    }
    with pytest.raises(ConfigError) as err:  # e^(1·100) with full covariances (float32, at most e^88.7)
        scenario_from_dict(doc)
    (problem,) = err.value.problems
    assert problem.startswith("algorithm.params.weight_b: s(n) = 1·e^(b·n) with b = 1 reaches e^100.0 at n")
    assert "float32 statistics of covariance = 'full' (at most e^88.7)" in problem
    diagonal = {**doc["algorithm"]["params"], "covariance": "diagonal"}  # float64: e^709.8
    assert scenario_from_dict({**doc, "algorithm": {"name": "gas", "params": diagonal}})
    smaller = {**doc["algorithm"]["params"], "weight_b": 0.5}  # e^50
    assert scenario_from_dict({**doc, "algorithm": {"name": "gas", "params": smaller}})
    plain = {**doc["algorithm"]["params"], "generate": False}  # no statistics: s(n) is never used
    assert scenario_from_dict({**doc, "algorithm": {"name": "gas", "params": plain}})


def test_full_covariances_that_cannot_fit_are_named_before_the_run_and_table5_vit_uses_diagonal():
    """Table 5's ViT GAS scenarios kept full covariances at d = 65·512 = 33,280 after the first block: 10
    labels' d×d float32 matrices and their factors, 82.5 GiB, allocated in the server at the first
    activation. The scenarios now use diagonal ones [A], and a run that would hold more than 8 GiB is told
    before it starts."""
    import warnings
    from pathlib import Path

    from raysfl.algorithms.gas import full_covariance_bytes, warn_of_large_covariances
    from raysfl.config import read_toml
    from raysfl.models.config import ModelConfig
    from raysfl.models.flops import profile_split_model
    from raysfl.models.zoo import build_split_model
    from raysfl.scenario import scenario_from_dict

    root = Path(__file__).resolve().parents[3] / "scenarios" / "gas" / "table5"
    for part in ("s2", "a0.1"):
        sc = scenario_from_dict(read_toml(root / f"cifar10_{part}_vit_small_gas.toml"))
        assert sc.params.covariance == "diagonal" and sc.train.weight_decay == 5e-4  # App. E "all datasets"
    with torch.device("meta"):
        vit = build_split_model(ModelConfig(name="vit_small", split="block1"), 3, 32, 10, 0)
    d = profile_split_model(vit).activation_numel
    assert d == 65 * 512
    full = scenario_from_dict(
        read_toml(root / "cifar10_s2_vit_small_gas.toml"), ['algorithm.params.covariance="full"']
    )
    assert full_covariance_bytes(full.params, 10, d) == 2 * 10 * d * d * 4
    assert full_covariance_bytes(sc.params, 10, d) == 0
    with pytest.warns(UserWarning, match=r"covariance = 'full' at d = 33,280 .* up to 82\.5 GiB"):
        warn_of_large_covariances(full.params, 10, d)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # AlexNet L2 on Fashion-MNIST, d = 3136: 0.7 GiB, no warning
        warn_of_large_covariances(full.params, 10, 3136)
        warn_of_large_covariances(sc.params, 10, d)


def test_a_decreasing_weighting_is_refused():
    """GAS §5 asks for an increasing s(n); a negative b made it decrease (older activations weigh more)."""
    from raysfl.config import ConfigError
    from raysfl.scenario import scenario_from_dict
    from tests.scenarios import TINY_GAS

    with pytest.raises(ConfigError, match=r"algorithm.params.weight_b"):
        scenario_from_dict(
            TINY_GAS, ['algorithm.params.weighting="polynomial"', "algorithm.params.weight_b=-1"]
        )
    constant = scenario_from_dict(
        TINY_GAS, ['algorithm.params.weighting="polynomial"', "algorithm.params.weight_b=0"]
    )
    assert constant.params.weight_b == 0  # s(n) = a: equal weights, an ablation
