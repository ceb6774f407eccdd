"""Student's t distribution for integer degrees of freedom: the CDF in closed form, and its quantile.

A report's paired mean difference over n seeds has n − 1 degrees of freedom; with the 3 to 6 seeds a
CPU-scale reproduction affords, the 95 % interval is mean ± t(0.975, n − 1) · SE with t = 4.30 (n = 3),
3.18 (n = 4) or 2.57 (n = 6), not the ± 2 · SE of a normal approximation. No SciPy: the package does not
depend on it for this one function.

For ν degrees of freedom and θ = arctan(t / √ν) the CDF is a finite sum (Abramowitz & Stegun 26.7.3 and
26.7.4, in the form of their CDF rather than A(t|ν) = 2 F(t) − 1):

    ν = 1:        F(t) = 1/2 + θ / π
    ν odd ≥ 3:    F(t) = 1/2 + (θ + sin θ · Σ_{j=0}^{(ν−3)/2} c_j cos^{2j+1} θ) / π,
                  c_0 = 1, c_j = c_{j−1} · 2j / (2j + 1)
    ν even:       F(t) = 1/2 + sin θ / 2 · Σ_{j=0}^{(ν−2)/2} d_j cos^{2j} θ,
                  d_0 = 1, d_j = d_{j−1} · (2j − 1) / (2j)
"""

from __future__ import annotations

import math


def _check_df(df: int) -> None:
    if isinstance(df, bool) or not isinstance(df, int) or df < 1:
        raise ValueError(f"degrees of freedom: {df!r} is not an integer >= 1")


def student_t_cdf(t: float, df: int) -> float:
    """P(T ≤ t) for Student's t with ``df`` degrees of freedom (A&S 26.7.3-4, module docstring).

    Example: with 2 degrees of freedom F(t) = 1/2 + t / (2 √(2 + t²)), so F(1) = 1/2 + 1 / (2 √3).

        >>> round(student_t_cdf(1.0, 2), 12) == round(0.5 + 1 / (2 * math.sqrt(3)), 12)
        True
    """
    _check_df(df)
    if math.isnan(t):
        raise ValueError("t: nan has no probability")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    theta = math.atan(t / math.sqrt(df))
    sin, cos = math.sin(theta), math.cos(theta)
    if df % 2 == 1:
        total, term = 0.0, cos
        for j in range((df - 1) // 2):
            if j > 0:
                term *= cos * cos * (2 * j) / (2 * j + 1)
            total += term
        return 0.5 + (theta + sin * total) / math.pi
    total, term = 0.0, 1.0
    for j in range(df // 2):
        if j > 0:
            term *= cos * cos * (2 * j - 1) / (2 * j)
        total += term
    return 0.5 + 0.5 * sin * total


def student_t_quantile(p: float, df: int) -> float:
    """The t with P(T ≤ t) = ``p``: the inverse of :func:`student_t_cdf`, by bisection to 1e-12.

    Example: the two-sided 95 % critical values for 1, 3 and 30 degrees of freedom.

        >>> [round(student_t_quantile(0.975, df), 3) for df in (1, 3, 30)]
        [12.706, 3.182, 2.042]
    """
    _check_df(df)
    if not 0.0 < p < 1.0:
        raise ValueError(f"p: {p!r} is not a probability strictly between 0 and 1")
    if p < 0.5:
        return -student_t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while student_t_cdf(high, df) < p:
        low, high = high, 2.0 * high
    while high - low > 1e-12 * max(1.0, high):
        middle = 0.5 * (low + high)
        if student_t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


def mean_interval(mean: float, standard_error: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """The two-sided ``level`` confidence interval of a mean of ``n`` values: mean ± t · SE, n − 1 df.

    Example: 4 paired differences with mean −8.20 and standard error 0.53 give −8.20 ± 3.182 · 0.53.

        >>> low, high = mean_interval(-8.20, 0.53, 4)
        >>> round(low, 2), round(high, 2)
        (-9.89, -6.51)
    """
    if n < 2:
        raise ValueError(f"n: {n} values give no interval; it needs at least 2")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: {level!r} is not a probability strictly between 0 and 1")
    half = student_t_quantile(0.5 + level / 2.0, n - 1) * standard_error
    return mean - half, mean + half
