"""Generated activations (GAS §5 "Generating and concatenation", eq. (5)) and the weighting s(n).

The server samples Â from the per-label Gaussians so that the concatenation of real and generated
activations is less biased towards the labels of fast clients. Two rules decide how many per label:

* ``"equal"``, the paper's aim [P]: "the server adjusts the sampling to ensure that each label has an equal
  amount of data"; read [A] as: every label with statistics is topped up to the count of the most frequent
  label in the buffer (B̂ up to (M − 1)·max n_y: a buffer of 320 of one label gets 2,880 generated).
* ``"top-up"`` [C]: every label with statistics is topped up to at least ``B`` samples (specs/gas.md §10.5);
  real activations are never dropped, so B̂ = Σ_y max(0, B − n_y).

Which labels count as having statistics is the server's gate (``generation_gate``): any label seen so far
[A], or, as the code (``all_labels_have_stats``), none until all M labels have been seen [C].
"""

from __future__ import annotations

import torch

from raysfl import profiling
from raysfl.algorithms.gas.stats import LabelGaussians


def staleness_weight(n: torch.Tensor | float, kind: str, a: float = 1.0, b: float = 1.0) -> torch.Tensor:
    """The increasing weighting function s(n) of GAS §5: linear a·n, polynomial a·n^b, exponential a·e^(b·n).

    The experiments use the linear s(n) = n [P].
    """
    n = torch.as_tensor(n, dtype=torch.float64)
    if kind == "linear":
        return a * n
    if kind == "polynomial":
        return a * n.pow(b)
    if kind == "exponential":
        return a * torch.exp(b * n)
    raise ValueError(f"unknown weighting {kind!r}; choose linear, polynomial or exponential")


def generation_counts(
    real_counts: torch.Tensor, available: torch.Tensor, rule: str, batch_size: int
) -> torch.Tensor:
    """How many activations to generate per label (eq. (5) B̂ split by label).

    Args:
        real_counts: n_y, real activations of each label in the buffer, shape (M,).
        available: which labels have statistics to sample from, bool shape (M,).
        rule: ``"equal"`` [P]/[A] or ``"top-up"`` [C] (module docstring).
        batch_size: B, the top-up target of the ``"top-up"`` rule.
    """
    real_counts = real_counts.to(torch.int64)
    if rule == "top-up":
        target = torch.full_like(real_counts, batch_size)
    elif rule == "equal":
        top = int(real_counts[available].max()) if bool(available.any()) else 0
        target = torch.full_like(real_counts, top)
    else:
        raise ValueError(f"unknown generation rule {rule!r}; choose 'equal' or 'top-up'")
    return torch.where(available, (target - real_counts).clamp(min=0), torch.zeros_like(real_counts))


class GaussianSampler:
    """Draws activations from :class:`LabelGaussians`, caching one Cholesky factor per label.

    A factor is recomputed only when its label's statistics changed since the last factorisation. When
    Σ + ridge·I is not positive definite, ε·I is added with ε = 1e-6, ×10 per retry, as the reference
    code does [C] (up to ``max_tries``).

    Everything is drawn where the statistics live (``stats.device``, the server's): the factors, the
    standard-normal draws (from a generator on that device) and the generated activations and labels.
    The counts per label are read on the CPU; the only device read is the success flag of a new
    factorisation (one per label whose statistics changed).
    """

    def __init__(self, stats: LabelGaussians, ridge: float, max_tries: int = 12) -> None:
        self.stats = stats
        self.ridge = ridge
        self.max_tries = max_tries
        self._factor: dict[int, tuple[int, torch.Tensor]] = {}

    def factor(self, y: int) -> torch.Tensor:
        """A matrix L with L Lᵀ = Σ_y + ridge·I (full) or the standard deviations (diagonal)."""
        version = int(self.stats.version[y])
        cached = self._factor.get(y)
        if cached is not None and cached[0] == version:
            return cached[1]
        cov = self.stats.cov[y]
        if self.stats.covariance == "diagonal":
            out = (cov.clamp(min=0) + self.ridge).sqrt()
        else:
            with profiling.section("server.cholesky"):
                out, _ = cholesky_with_jitter(cov, self.ridge, self.max_tries)
        self._factor[y] = (version, out)
        return out

    def sample(self, counts: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample ``counts[y]`` activations of each label y; returns (Â (B̂, d) float32, Ŷ (B̂,)), by label.

        ``counts`` is a CPU tensor; ``gen`` a generator on the statistics' device, where the results are.
        """
        device = self.stats.cov.device
        chunks, labels = [], []
        for y, k in enumerate(counts.tolist()):
            if k == 0:
                continue
            mu = self.stats.mean[y].to(self.stats.cov.dtype)
            z = torch.randn(k, mu.shape[0], generator=gen, dtype=mu.dtype, device=device)
            f = self.factor(y)
            noise = z * f if f.dim() == 1 else z @ f.T
            chunks.append((mu + noise).to(torch.float32))
            labels.append(torch.full((k,), y, dtype=torch.int64, device=device))
        if not chunks:
            d = self.stats.dim
            return torch.zeros(0, d, device=device), torch.zeros(0, dtype=torch.int64, device=device)
        return torch.cat(chunks), torch.cat(labels)


def cholesky_with_jitter(cov: torch.Tensor, shift: float, max_tries: int = 12) -> tuple[torch.Tensor, float]:
    """A factor L with L Lᵀ = Σ + (shift + ε)·I and the ε it needed (0 when Σ + shift·I is positive definite).

    ε starts at 1e-6 and grows ×10 per retry, as the reference code's fallback does [C].
    """
    jitter = 0.0
    for attempt in range(max_tries):
        L, info = torch.linalg.cholesky_ex(shifted(cov, shift + jitter))
        if int(info) == 0:
            return L, jitter
        jitter = 1e-6 * 10**attempt
    raise RuntimeError(
        f"covariance is not positive definite even with {jitter:g}·I added; "
        "use algorithm.params.covariance = 'diagonal' or a larger algorithm.params.ridge"
    )


def shifted(cov: torch.Tensor, shift: float) -> torch.Tensor:
    """Σ + shift·I, the same numbers as ``cov + shift * eye`` without building the d×d identity.

    No shift (the code's per-flush statistics carry their ridge already) factorises Σ itself, with no
    copy; otherwise one copy whose diagonal gets the shift. Off the diagonal, ``x + 0.0`` is ``x``, so
    only the sign of an exact zero can differ from the expression, which a Cholesky factor ignores.
    For d = 3136 this saves two 39 MB temporaries and two passes over them per factorisation.
    """
    if shift == 0.0:
        return cov
    out = cov.clone()
    out.diagonal().add_(shift)
    return out


def log_prior(label_hist: torch.Tensor, tau: float = 1.0) -> torch.Tensor:
    """The logit adjustment log(P_k(y)^τ + 1e-12) of a client's label distribution (GAS eq. (6), §10.7)."""
    p = label_hist.to(torch.float64) / max(float(label_hist.sum()), 1.0)
    return torch.log(p.pow(tau) + 1e-12).to(torch.float32)


__all__ = [
    "GaussianSampler",
    "cholesky_with_jitter",
    "generation_counts",
    "log_prior",
    "shifted",
    "staleness_weight",
]
